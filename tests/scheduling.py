"""How the suite's workers share the test files (pytest-xdist, `--dist loadfile`): the files
that mostly wait go to a worker of their own.

This machine has two cores and the suite is mostly CPU-bound: two workers keep them busy, and
a third running the same mix made the CPU-bound tests twice as slow and the load-sensitive
ones fail. But some files spend most of their time waiting, not computing: a five-minute
partition, faults with the shipped defaults' failure detection, daemons restarting peers.
Measured on this project's 2-core machine (per file, CPU seconds of the test process and the
processes it reaped, against wall seconds, in a whole-suite run), each of WAITING used under
a third of a core. The first COMPUTING workers (as many as CPUs, two at least) take the other
files first, then these; any further worker (the third of `-n 3`, pyproject.toml's default,
on a 2-core machine) takes only these, and stops when none is left, so at most two workers
compute at once and the waiting overlaps them.

This subclasses pytest-xdist's LoadFileScheduling and relies on its work queue (an ordered
mapping of files to their tests) and on `_assign_work_unit`, which hands the queue's first
file to a worker: pyproject.toml pins pytest-xdist below 4.
"""

from __future__ import annotations

import os
from typing import Any

from xdist.scheduler import LoadFileScheduling

# The files that mostly wait. Wall seconds / CPU seconds in that run (two workers, 2026-11-28):
# 319/75, 160/22, 130/35, 118/27, 102/29, 72/25, 61/14, 51/16, 30/6, 27/3, 27/14, 25/10, 24/5,
# 15/3.
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
# The first this many live workers (by number) take every file, the others only WAITING's:
# as many as there are CPUs, two at least (on a bigger machine every worker computes).
COMPUTING = max(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2)

# The files that take longest, longest first: each worker takes the first it may of these,
# then the rest in xdist's order (most tests first). A long file taken last keeps one worker
# busy alone at the end (the five-minute partition once made the suite 31 minutes). Measured
# with three workers on this project's 2-core machine (`--durations`, per file, 2026-11-29:
# 327 s down to 35 s).
LONGEST_FIRST = (
    "tests/testbed/test_partitions.py",
    "tests/integration/test_checkpoint_procs.py",
    "tests/integration/test_crash_kinds_procs.py",
    "tests/integration/test_run.py",
    "tests/integration/test_spmd_procs.py",
    "tests/integration/test_crash_procs.py",
    "tests/integration/test_shared_procs.py",
    "tests/integration/test_recovery_procs.py",
    "tests/testbed/test_restarts.py",
    "tests/testbed/test_matrix.py",
    "tests/sim/test_recovery.py",
    "tests/integration/test_speculation_procs.py",
    "tests/sim/test_simulator.py",
    "tests/integration/test_daemon.py",
    "tests/integration/test_iterative_procs.py",
    "tests/integration/test_hardening.py",
    "tests/sim/test_shared_sim.py",
    "tests/integration/test_ship_procs.py",
    "tests/configs/test_slurm.py",
    "tests/integration/test_leave_procs.py",
    "tests/integration/test_roles_procs.py",
    "tests/integration/test_spmd_masters_procs.py",
    "tests/security/test_http_fuzz.py",
    "tests/sim/test_logged_sim.py",
    "tests/integration/test_history_procs.py",
    "tests/integration/test_run_control.py",
)
_RANK = {name: i for i, name in enumerate(LONGEST_FIRST)}


class WaitingApart(LoadFileScheduling):  # type: ignore[misc]  # xdist has no type marker
    """LoadFileScheduling, but the longest files first, a worker past the first COMPUTING
    takes only WAITING files, and the first COMPUTING take the others before those."""

    def _assign_work_unit(self, node: Any) -> None:
        files = sorted(self.workqueue, key=lambda f: _RANK.get(f, len(_RANK)))  # stable
        if len(self.nodes) <= COMPUTING:  # no worker to wait apart: the longest first
            self.workqueue.move_to_end(files[0], last=False)
            super()._assign_work_unit(node)
            return
        if _waiter(node, self.nodes):
            chosen = next((f for f in files if f in WAITING), None)
        else:
            chosen = next((f for f in files if f not in WAITING), files[0])
        if chosen is None:  # a waiter with nothing left to wait on: it ends
            node.shutdown()
            return
        self.workqueue.move_to_end(chosen, last=False)
        super()._assign_work_unit(node)


def _waiter(node: Any, nodes: list[Any]) -> bool:
    """Whether ``node`` is past the first COMPUTING live workers, by their numbers (gw0 first;
    a worker xdist starts in place of one that crashed has the next number)."""
    numbers = sorted(_number(n) for n in nodes)
    return _number(node) not in numbers[:COMPUTING]


def _number(node: Any) -> int:
    """The worker's number: 0 for gw0 (-1 for an id of another form: it computes)."""
    name = str(node.gateway.id)
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else -1
