"""How the suite's workers share the test files (pytest-xdist, `--dist loadfile`): the files
that mostly wait go to a worker of their own.

This machine has two cores and the suite is mostly CPU-bound: two workers keep them busy, and
a third running the same mix made the CPU-bound tests twice as slow and the load-sensitive
ones fail. But some files spend most of their time waiting, not computing: a five-minute
partition, faults with the shipped defaults' failure detection, daemons restarting peers.
Measured on this project's 2-core machine (per file, CPU seconds of the test process and the
processes it reaped, against wall seconds, in a whole-suite run), each of WAITING used under
a third of a core. Workers gw0 and gw1 take the other files first, then these; any further
worker (`-n 3`, pyproject.toml's default) takes only these, and stops when none is left, so
at most two workers compute at once and the waiting overlaps them.

This subclasses pytest-xdist's LoadFileScheduling and relies on its work queue (an ordered
mapping of files to their tests) and on `_assign_work_unit`, which hands the queue's first
file to a worker: pyproject.toml pins pytest-xdist below 4.
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadFileScheduling

# The files that mostly wait, longest first (tests/conftest.py's LONGEST_FIRST orders the
# queue). Wall seconds / CPU seconds in that run: 319/75, 160/22, 130/35, 118/27, 102/29,
# 72/25, 61/14, 51/16, 30/6, 27/3, 27/14, 25/10, 24/5, 15/3.
WAITING = frozenset(
    {
        "tests/testbed/test_partitions.py",
        "tests/integration/test_spmd_masters_procs.py",
        "tests/integration/test_checkpoint_procs.py",
        "tests/testbed/test_matrix.py",
        "tests/testbed/test_restarts.py",
        "tests/integration/test_hardening.py",
        "tests/integration/test_ship_procs.py",
        "tests/integration/test_leave_procs.py",
        "tests/integration/test_logged_procs.py",
        "tests/security/test_http_fuzz.py",
        "tests/integration/test_durable_results.py",
        "tests/integration/test_daemon_port_held.py",
        "tests/integration/test_master_drain.py",
        "tests/integration/test_metrics_procs.py",
    }
)
# Workers gw0 .. gw{COMPUTING - 1} take every file; the others only WAITING's.
COMPUTING = 2


class WaitingApart(LoadFileScheduling):  # type: ignore[misc]  # xdist has no type marker
    """LoadFileScheduling, but a worker past the first COMPUTING takes only WAITING files
    and the first COMPUTING take the others before those."""

    def _assign_work_unit(self, node: Any) -> None:
        if len(self.nodes) <= COMPUTING:  # no worker to wait apart: the queue's order
            super()._assign_work_unit(node)
            return
        files = list(self.workqueue)
        if _index(node) >= COMPUTING:
            chosen = next((f for f in files if f in WAITING), None)
        else:
            chosen = next((f for f in files if f not in WAITING), files[0])
        if chosen is None:  # a waiter with nothing left to wait on: it ends
            node.shutdown()
            return
        self.workqueue.move_to_end(chosen, last=False)
        super()._assign_work_unit(node)


def _index(node: Any) -> int:
    """The worker's number: 0 for gw0."""
    return int(str(node.gateway.id).removeprefix("gw"))
