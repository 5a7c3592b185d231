"""Two runs at once on two daemons with the shipped defaults: a run submitted while a long one
keeps every compute thread busy is taken by a peer within seconds and ends while the long one
still runs — it does not wait for it. (Its root is stolen once the master's queue holds nothing
older of the long run, as here, or at once with work/workqueue.py's turn between runs, which
tests/engine/test_workqueue.py checks; a peer whose own queue is full steals nothing, so the
runs do not share every peer evenly: issue 46's point 4 stays open.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import satind
from tests.integration.test_daemon import Daemon, status, wait_for

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
        second = cluster.submit("fib", "22", "12")
        assert second.result(timeout=120) == 17711
        took = time.monotonic() - submitted
        # Ended while the long run still runs: it did not wait for it to end.
        assert long.status() == "running", f"the second run took {took:.1f} s"
        assert long.outcome(timeout=240).check == "ok"
