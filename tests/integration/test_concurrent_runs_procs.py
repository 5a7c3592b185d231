"""Two runs at once on two daemons with the shipped defaults: a run submitted while a long one
keeps every compute thread busy is taken by a peer within seconds and ends while the long one
still runs — it does not wait for it. (An idle thief takes the runs in turn,
work/workqueue.py, which tests/engine/test_workqueue.py checks; when no peer is idle, as here,
the master's compute thread starts the root at a job boundary once it has waited
``engine.nest_roots_after_s``, which tests/engine/test_worker.py checks.)"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

import satind
from tests.integration.test_daemon import Daemon, client, status, wait_for

pytestmark = pytest.mark.slow


def test_a_second_run_makes_progress_beside_a_long_one(
    keys: Path, two_machines: tuple[Daemon, Daemon]
) -> None:
    m1 = two_machines[0]
    wait_for(lambda: [p["state"] for p in status(keys, m1.first)["peers"]].count("alive") == 4)
    with satind.connect(m1.first, keys) as cluster:
        # 4^5 leaves of 60 ms of sleep: about 15 s on four peers, every compute thread busy.
        long = cluster.submit("tree", "5", "4", "60", "sleep")
        wait_for(lambda: long.progress() > 0.05, limit=60)
        submitted = time.monotonic()
        second = cluster.submit("fib", "22", "12", weight=2.0)  # twice the steals, if any
        assert second.result(timeout=120) == 17711
        took = time.monotonic() - submitted
        # Ended while the long run still runs: it did not wait for it to end.
        assert long.status() == "running", f"the second run took {took:.1f} s"
        assert long.outcome(timeout=240).check == "ok"


def test_a_run_no_peer_works_on_says_it_is_waiting_for_peers(keys: Path) -> None:
    # One peer, one compute thread, held by a leaf that sleeps 8 s: the next run's root
    # waits in the queue behind it, and every view says so — not "running 0.0%".
    m1 = Daemon(keys, "m1", "east", peers=1)
    try:
        with satind.connect(m1.first, keys) as cluster:
            long = cluster.submit("tree", "0", "2", "8000", "sleep")
            wait_for(lambda: _row(keys, m1, long.id)["counters"].get("jobs_entered", 0) > 0)
            second = cluster.submit("fib", "20")
            wait_for(lambda: second.id in {r["run_id"] for r in status(keys, m1.first)["runs"]})
            assert _row(keys, m1, second.id)["waiting"] is True
            assert _row(keys, m1, long.id)["waiting"] is False  # begun: not waiting
            assert second.waiting() is True and long.waiting() is False  # the Python API
            shown = client(keys, m1.first, "status")
            assert shown.returncode == 0, shown.stderr
            line = next(x for x in shown.stdout.splitlines() if second.id in x)
            assert "waiting" in line and "running" not in line, shown.stdout
            assert second.result(timeout=60) == 6765
            assert long.outcome(timeout=60).check == "ok"
    finally:
        m1.kill()


def _row(keys: Path, daemon: Daemon, run_id: str) -> dict[str, Any]:
    return next(r for r in status(keys, daemon.first)["runs"] if r["run_id"] == run_id)
