"""The crash matrix on the testbed (issue 45, point 5): a run submitted to one machine (its first
peer masters it), and mid-run one fault — a peer, the master, a machine, the master's machine,
a clean stop, a pause, a partition, a drain with a deadline — then the answer checked exact
against tests/references.py. The suite runs each fault once (tests/testbed/test_matrix.py);
`benchmarks/crashes.py --testbed` runs them with every plugin, many times.

Machines are started again the way an operator or a service manager would (the daemon itself
restarts crashed peers): a crashed machine 3 s after the crash, a stopped or drained one at
once. Every fault is undone before the answer is awaited, so a run never waits on a fault the
test left in place."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from satind.testbed import Testbed
from tests.testbed.runs import Submitted, answer, answers, submit

# seconds. A machine crashed is down this long before its daemon is started again.
DOWN_S = 3.0
# seconds. A pause or a partition lasts this long: well past failure detection, so that the
# run's master is taken for dead and its run taken over.
OUTAGE_S = 20.0


@dataclass(frozen=True)
class Where:
    """The run's master machine and another machine (the victim of the faults that are not
    the master's)."""

    master: str
    other: str


def _peer(bed: Testbed, at: Where) -> None:
    bed.kill_peer(f"{at.other}/1")


def _master(bed: Testbed, at: Where) -> None:
    bed.kill_peer(f"{at.master}/0")


def _machine(bed: Testbed, at: Where) -> None:
    bed.crash(at.other)
    time.sleep(DOWN_S)
    bed.start(at.other)


def _master_machine(bed: Testbed, at: Where) -> None:
    bed.crash(at.master)
    time.sleep(DOWN_S)
    bed.start(at.master)


def _stop(bed: Testbed, at: Where) -> None:
    bed.stop(at.other)
    bed.start(at.other)


def _pause_master(bed: Testbed, at: Where) -> None:
    bed.pause(at.master)
    try:
        time.sleep(OUTAGE_S)
    finally:
        bed.resume(at.master)


def _partition_master(bed: Testbed, at: Where) -> None:
    rest = [m for m in bed.machines if m != at.master]
    bed.cut([at.master], rest)
    try:
        time.sleep(OUTAGE_S)
    finally:
        bed.heal()


def _drain(bed: Testbed, at: Where) -> None:
    bed.stop(at.other, drain=True, deadline_s=5)
    bed.start(at.other)


FAULTS: dict[str, Callable[[Testbed, Where], None]] = {
    "peer": _peer,
    "master": _master,
    "machine": _machine,
    "master-machine": _master_machine,
    "stop": _stop,
    "pause-master": _pause_master,
    "partition-master": _partition_master,
    "drain-deadline": _drain,
}

# A run of about 15 s on four machines of two peers (sleeping leaves: two CPUs do not decide
# it), long enough for every fault to land mid-run; twice that on half the machines. And a
# short CPU-bound one.
RUN = ("tree", "5", "4", "100", "sleep")
SHORT = ("nqueens", "10")


@dataclass
class Outcome:
    report: dict[str, Any]
    # From the submission to the answer, and from the fault's end to the answer (the client's,
    # before it is checked).
    wall_s: float
    after_fault_s: float


def run_fault(
    bed: Testbed,
    fault: str,
    argv: tuple[str, ...] = RUN,
    at: Where = Where("m2", "m3"),
    after_s: float = 4.0,
    limit: float = 300.0,
) -> Outcome:
    """Submit ``argv`` to ``at.master``, apply ``fault`` ``after_s`` into the run, and check
    the answer.

    Raises:
        AssertionError: the run ended before the fault (make it longer), or its answer was
            late, failed or wrong (the message says which).
    """
    bed.wait_one_system(60)
    began = time.monotonic()
    run: Submitted = submit(bed, at.master, *argv)
    time.sleep(after_s)
    if run.proc.poll() is not None:
        _, err = run.proc.communicate()
        raise AssertionError(f"{fault}: {argv} ended before the fault: {err[-500:]}")
    FAULTS[fault](bed, at)
    fault_end = time.monotonic()
    report = answer(run, limit)
    ended = run.answered or time.monotonic()
    return Outcome(report, ended - began, ended - fault_end)


def partition_with_runs(bed: Testbed, side_a: list[str], side_b: list[str], cut_s: float) -> float:
    """A cut of ``cut_s`` between ``side_a`` (whose first machine masters the first run) and
    ``side_b``, with runs submitted on both sides before and during it; returns how long after
    the heal every peer saw every other alive. Every answer is checked exact.

    Raises:
        AssertionError: a run late, failed or wrong, or no one system within 60 s.
    """
    before = [submit(bed, side_a[0], *RUN), submit(bed, side_b[0], *SHORT)]
    time.sleep(3)  # the long run is under way on every machine
    bed.cut(side_a, side_b)
    try:
        cut_at = time.monotonic()
        time.sleep(min(2.0, cut_s / 2))
        during = [submit(bed, side_a[-1], *SHORT), submit(bed, side_b[-1], *RUN)]
        time.sleep(max(0.0, cut_s - (time.monotonic() - cut_at)))
    finally:
        bed.heal()
    healed = bed.wait_one_system(60)
    answers([*before, *during], 300)
    return healed
