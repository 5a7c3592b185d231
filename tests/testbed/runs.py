"""Runs on a testbed, as a user submits them: `satind submit ... --wait --json` from the host,
each answer compared with an independent reference (tests/references.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from satind.testbed import Testbed
from tests import references


@dataclass
class Submitted:
    argv: tuple[str, ...]
    to: str
    proc: subprocess.Popen[str]
    at: float


def submit(bed: Testbed, to: str, *argv: str) -> Submitted:
    """`satind submit ARGV --wait --json` to machine ``to``, left running."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "satind", "submit", *argv, "--wait", "--json", *bed.client_args(to)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return Submitted(tuple(argv), to, proc, time.monotonic())


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
    assert run.proc.returncode == 0, f"{run.argv} to {run.to}: {err[-3000:]}"
    report: dict[str, Any] = json.loads(out)
    references.verify(run.argv[0], run.argv[1:], report["result"])
    return report


def answers(runs: Sequence[Submitted], limit: float) -> list[dict[str, Any]]:
    """Every run's answer (each checked), waiting at most ``limit`` s in all."""
    end = time.monotonic() + limit
    return [answer(run, max(1.0, end - time.monotonic())) for run in runs]
