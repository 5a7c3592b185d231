"""Runs on a testbed, as a user submits them: `satind submit ... --wait --json` from the host,
each answer compared with an independent reference (tests/references.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from satind.testbed import Testbed
from tests import references


@dataclass
class Submitted:
    argv: tuple[str, ...]
    to: str
    proc: subprocess.Popen[str]
    at: float
    # What its client said on stderr before the run was accepted.
    said: list[str] = field(default_factory=list)
    # When its client answered (time.monotonic()), before the answer is checked: a reference
    # can take seconds (othello's 10 s) that are not the run's.
    answered: float | None = None


def submit(bed: Testbed, to: str, *argv: str, accepted_s: float = 60.0) -> Submitted:
    """`satind submit ARGV --wait --json` to machine ``to``, left running once the run was
    accepted (its client says "satind: run RUN_ID submitted"): a fault a test starts next
    must find the run there, not a client still starting (six at once on a loaded machine
    took more than 4 s to connect).

    Raises:
        AssertionError: not accepted within ``accepted_s`` (its client is killed then).
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "satind", "submit", *argv, "--wait", "--json", *bed.client_args(to)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    run = Submitted(tuple(argv), to, proc, time.monotonic())
    assert proc.stderr is not None
    # A client that never says so is killed: its stderr then ends, and the loop with it.
    timer = threading.Timer(accepted_s, proc.kill)
    timer.start()
    try:
        while True:
            line = proc.stderr.readline()
            run.said.append(line)
            if not line or "submitted" in line:
                break
    finally:
        timer.cancel()
    if not line:
        _, err = proc.communicate()
        raise AssertionError(f"{argv} to {to}: not accepted: {''.join(run.said)}{err}")
    return run


def answer(run: Submitted, limit: float) -> dict[str, Any]:
    """Its answer, checked exact against the reference.

    Raises:
        AssertionError: no answer within ``limit`` s (its client is killed), a failure, or a
            wrong answer.
    """
    try:
        out, err = run.proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        run.proc.kill()
        run.proc.communicate()
        raise AssertionError(f"{run.argv} to {run.to}: no answer in {limit:g} s") from None
    run.answered = time.monotonic()
    said = "".join(run.said) + err
    assert run.proc.returncode == 0, f"{run.argv} to {run.to}: {said[-3000:]}"
    report: dict[str, Any] = json.loads(out)
    references.verify(run.argv[0], run.argv[1:], report["result"])
    return report


def answers(runs: Sequence[Submitted], limit: float) -> list[dict[str, Any]]:
    """Every run's answer (each checked), waiting at most ``limit`` s in all."""
    end = time.monotonic() + limit
    return [answer(run, max(1.0, end - time.monotonic())) for run in runs]
