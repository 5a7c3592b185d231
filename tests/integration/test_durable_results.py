"""A finished run's result outlives its master: `satind result` from any peer answers after
the master was drained, and after its whole machine was SIGKILLed; a run no member knows
fails at once."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests import independent
from tests.integration.test_daemon import Daemon, client, client_in_background, status, wait_for
from tests.integration.test_recovery_procs import FAST

pytestmark = pytest.mark.slow
GOOD = ["tree", "3", "4", "5", "sleep"]  # 81 leaves of 5 ms


def _run_on(keys: Path, to: str) -> str:
    proc = client(keys, to, "submit", *GOOD, "--wait", "--json", timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["result"] == independent.tree(3, 4)
    return str(out["run_id"])


def _result(keys: Path, to: str, run_id: str) -> object:
    proc = client(keys, to, "result", run_id, "--json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["result"]


def _state(keys: Path, to: str, name: str) -> str:
    return next((p["state"] for p in status(keys, to)["peers"] if p["slot"] == name), "unknown")


def test_a_result_is_fetched_from_survivors_after_its_master_was_drained_or_killed(
    keys: Path, two_machines: tuple[Daemon, Daemon]
) -> None:
    m1, m2 = two_machines
    wait_for(lambda: len(status(keys, m1.first)["peers"]) == 4)
    drained = _run_on(keys, m1.addresses["m1/1"])
    killed = _run_on(keys, m1.first)
    # The master m1/1 is drained and leaves: its result stays answerable.
    assert client(keys, m2.first, "drain", "m1/1").returncode == 0
    wait_for(lambda: _state(keys, m2.first, "m1/1") == "left")
    started = time.monotonic()
    assert _result(keys, m2.first, drained) == independent.tree(3, 4)
    assert time.monotonic() - started < 15  # not a timeout and a blame
    # The whole machine of m1/0 is SIGKILLed (no restart): a copy on m2 answers. Its peers
    # are gone ("left" when they saw their daemon's pipe close before the SIGKILL reached
    # them, else "dead").
    m1.kill()
    wait_for(lambda: _state(keys, m2.first, "m1/0") in ("dead", "left"), limit=60)
    assert _result(keys, m2.first, killed) == independent.tree(3, 4)
    assert _result(keys, m2.addresses["m2/1"], drained) == independent.tree(3, 4)
    # A run that no member knows fails at once, and says so.
    started = time.monotonic()
    proc = client(keys, m2.first, "result", "20990101-000000-000000", "--wait")
    assert proc.returncode == 1 and "no member of the system keeps its result" in proc.stderr
    assert time.monotonic() - started < 15


def test_a_run_queued_by_a_master_that_is_killed_is_run_by_a_survivor(keys: Path) -> None:
    config = keys / "one-at-a-time.toml"
    config.write_text(FAST + "[run]\nmax_concurrent = 1\n")  # deaths found in about a second
    fast = keys / "fast.toml"
    fast.write_text(FAST)
    m1 = Daemon(keys, "m1", "east", "", "--config", str(config))
    m2 = Daemon(keys, "m2", "west", m1.first, "--config", str(fast))  # runs up to 4 at once
    waiting = []
    try:
        wait_for(lambda: len(status(keys, m2.first)["peers"]) == 4)
        # m1/0 runs a long run and queues the next one.
        for argv in (["tree", "3", "8", "60", "sleep"], GOOD):
            waiting.append(
                client_in_background(keys, m1.first, "submit", *argv, "--wait", "--json")
            )
            time.sleep(1.0)
        wait_for(lambda: "queued" in {r["state"] for r in status(keys, m2.first)["runs"]})
        m1.kill()  # the master and its machine, SIGKILL: no restart
        out, err = waiting[1].communicate(timeout=120)
        assert waiting[1].returncode == 0, err
        assert json.loads(out)["result"] == independent.tree(3, 4)
    finally:
        for proc in waiting:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        m1.kill()
        m2.kill()
