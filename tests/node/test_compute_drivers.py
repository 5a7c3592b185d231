"""One compute side, two drivers: the same cases against the real peer's thread driver
(``node/compute.py``) and the simulator's lockstep driver (``sim/lockstep.py``).

Both drive the one ``engine.worker.Worker``; what differs is how its thread takes turns and
how hook calls reach the network side (``soon``). Each case below is what the node relies on,
whichever driver runs under it: roots run to their value, failures are reported, a stolen
job's value leaves encoded, a frame whose child is out elsewhere asks for its run's work and
finishes when the child's result arrives, a run that ends elsewhere frees the frames waiting
for it, and ``stop`` ends the driver.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import trio

from satind import spawnable, sync
from satind.config import EngineConfig
from satind.engine import worker as worker_mod
from satind.engine.frames import ChildResult, JobArrived, Wakeup, make_root
from satind.engine.worker import Worker
from satind.net.codec import Encoded, encode_value
from satind.net.messages import ReplicaReply, SharedDigest, SharedUpdates
from satind.net.records import SharedUpdate
from satind.node.compute import ComputeDriver, ThreadCompute
from satind.sim.lockstep import LockstepCompute, spend
from satind.work.jobs import Job, RunState
from satind.work.reports import Report
from tests.engine.reports import to_method

MAX_FRAME = 1 << 20
DEPTH = 64


class Hooks:
    """The network side of the test: hook calls arrive through the driver's ``soon``, on the
    trio thread, as on a peer."""

    def __init__(self) -> None:
        self.driver: ComputeDriver | None = None
        self.finished: list[Job] = []
        self.wants: list[tuple[bool, str]] = []
        self.changed = trio.Event()

    def report(self, event: Report) -> None:
        to_method(self, event)

    def _soon(self, fn: Callable[..., None], *args: Any) -> None:
        assert self.driver is not None
        self.driver.soon(fn, *args)

    def _record(self, log: list[Any], item: Any) -> None:
        log.append(item)
        self.changed.set()

    def want_work(self, wanted: bool, run_id: str = "") -> None:
        self._soon(self._record, self.wants, (wanted, run_id))

    def job_finished(self, job: Job) -> None:
        self._soon(self._record, self.finished, job)

    def orphan_hit(self, job: Job, holder: str) -> None:
        pass

    def orphan_result(self, job: Job, value: bytes) -> None:
        pass

    def subtree_dropped(self, job: Job) -> None:
        pass

    def children_aborted(self, frame: Job) -> None:
        pass

    def shared_update(self, update: SharedUpdate) -> None:
        pass

    def shared_send(self, thief: str, reply: ReplicaReply | SharedDigest | SharedUpdates) -> None:
        pass

    def guard_waiting(self, job: Job, waiting: bool = True) -> None:
        pass

    def result_waiting(self, job: Job, sender: str, waiting: bool = True) -> None:
        pass

    def task_ready(self, job: Job) -> None:
        pass

    def barrier(self, run_id: str, iteration: int, state: bytes) -> None:
        pass

    def entity_done(
        self,
        run_id: str,
        entity: int,
        gen: int,
        iteration: int,
        state: Any,
        ghosts: dict[int, bytes],
        measured: tuple[float, float, int],
    ) -> None:
        pass

    def spmd_iteration(self, run_id: str, iteration: int, profiles: list[Any]) -> None:
        pass

    def job_logged(self, job: Job, value: bytes) -> None:
        pass

    def snapshot_taken(self) -> None:
        pass

    async def until(self, check: Callable[[], bool]) -> None:
        with trio.fail_after(30):
            while not check():
                self.changed = trio.Event()
                await self.changed.wait()


def _thread(hooks: Hooks) -> ComputeDriver:
    return ThreadCompute(Worker(EngineConfig(), hooks, max_frame=MAX_FRAME, value_depth=DEPTH))


def _lockstep(hooks: Hooks) -> ComputeDriver:
    return LockstepCompute(
        EngineConfig(), hooks, lambda *_: None, max_frame=MAX_FRAME, value_depth=DEPTH
    )


DRIVERS = pytest.mark.parametrize("make", [_thread, _lockstep], ids=["thread", "lockstep"])


@spawnable
def fib(n: int) -> int:
    if n < 2:
        return n
    a = fib.spawn(n - 1)
    b = fib.spawn(n - 2)
    sync()
    return a.result() + b.result()


@spawnable
def fails(n: int) -> int:
    raise ValueError(f"bad {n}")


@spawnable
def leaf(n: int) -> int:
    # A leaf that takes time on either driver: virtual time in the simulator (the trio
    # side gets the turn meanwhile), wall time on a thread.
    spend(0.05, (n,))
    time.sleep(0.05)
    return n


# Jobs that a case's job hands to the test's "thief" (taken on the compute thread, so that
# the order of events is the same on both drivers).
TAKEN: list[Job] = []


@spawnable
def one_out(n: int) -> int:
    kept = leaf.spawn(n)
    out = leaf.spawn(n + 1)
    worker = worker_mod.CURRENT
    assert worker is not None
    taken = worker.queue.steal()  # the oldest: ``kept``; a thief runs it elsewhere
    assert taken is not None
    TAKEN.append(taken)
    sync()
    return int(kept.result()) * 10 + int(out.result())


def _run(run_id: str = "r1") -> RunState:
    return RunState(run_id, "test", 0.5)


def _value(job: Job) -> object:
    got = job.result()
    return got.decode() if isinstance(got, Encoded) else got


async def _with(make: Callable[[Hooks], ComputeDriver], case: Callable[..., Any]) -> None:
    hooks = Hooks()
    driver = make(hooks)
    hooks.driver = driver
    TAKEN.clear()
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.serve)
        try:
            await case(driver, hooks)
        finally:
            driver.stop()
            nursery.cancel_scope.cancel()  # the thread driver serves until cancelled


@DRIVERS
async def test_roots_run_to_their_values_and_count(make: Callable[[Hooks], ComputeDriver]) -> None:
    async def case(driver: ComputeDriver, hooks: Hooks) -> None:
        run = _run()
        roots = [make_root(fib.fn, (n,), run) for n in (10, 15)]
        for root in roots:
            driver.queue_root(root)
        await hooks.until(lambda: len(hooks.finished) == 2)
        assert {_value(r) for r in roots} == {55, 610}
        assert all(isinstance(r.result(), Encoded) for r in roots)  # they leave encoded
        assert run.spawns > 0 and run.leaves_run > 0

    await _with(make, case)


@DRIVERS
async def test_a_failing_job_is_reported_with_its_error(
    make: Callable[[Hooks], ComputeDriver],
) -> None:
    async def case(driver: ComputeDriver, hooks: Hooks) -> None:
        root = make_root(fails.fn, (3,), _run())
        driver.queue_root(root)
        await hooks.until(lambda: root in hooks.finished)
        assert isinstance(root.error, ValueError) and "bad 3" in str(root.error)
        # The compute side is whole: the next run runs.
        again = make_root(fib.fn, (12,), _run("r2"))
        driver.queue_root(again)
        await hooks.until(lambda: again in hooks.finished)
        assert _value(again) == 144

    await _with(make, case)


@DRIVERS
async def test_a_stolen_job_arrives_encoded_runs_and_leaves_encoded(
    make: Callable[[Hooks], ComputeDriver],
) -> None:
    async def case(driver: ComputeDriver, hooks: Hooks) -> None:
        stolen = Job(fib.fn, Encoded(encode_value((11,), MAX_FRAME)), None, 0, _run(), 0.5)
        stolen.set_path(b"\x01")
        stolen.origin = "victim"
        driver.post(JobArrived(stolen))
        await hooks.until(lambda: stolen in hooks.finished)
        assert isinstance(stolen.result(), Encoded) and _value(stolen) == 89

    await _with(make, case)


@DRIVERS
async def test_a_frame_with_a_child_out_asks_for_its_runs_work_and_finishes_on_its_result(
    make: Callable[[Hooks], ComputeDriver],
) -> None:
    async def case(driver: ComputeDriver, hooks: Hooks) -> None:
        root = make_root(one_out.fn, (4,), _run())
        driver.queue_root(root)
        await hooks.until(lambda: (True, "r1") in hooks.wants)
        assert not root.done and len(TAKEN) == 1
        # The thief's result arrives (encoded, as from the wire).
        driver.post(ChildResult(TAKEN[0], Encoded(encode_value(4, MAX_FRAME)), None))
        await hooks.until(lambda: root in hooks.finished)
        assert _value(root) == 45

    await _with(make, case)


@DRIVERS
async def test_a_run_that_ends_elsewhere_frees_the_frame_waiting_for_it(
    make: Callable[[Hooks], ComputeDriver],
) -> None:
    async def case(driver: ComputeDriver, hooks: Hooks) -> None:
        run = _run()
        root = make_root(one_out.fn, (1,), run)
        driver.queue_root(root)
        await hooks.until(lambda: (True, "r1") in hooks.wants)
        run.aborted = True  # its result came from elsewhere: nobody needs this frame
        driver.post(Wakeup())
        other = make_root(fib.fn, (9,), _run("r2"))
        driver.queue_root(other)
        await hooks.until(lambda: other in hooks.finished)
        assert _value(other) == 34 and not root.done
        assert driver.worker.nesting == 0

    await _with(make, case)


@DRIVERS
async def test_stop_ends_the_driver_with_a_frame_waiting(
    make: Callable[[Hooks], ComputeDriver],
) -> None:
    hooks = Hooks()
    driver = make(hooks)
    hooks.driver = driver
    TAKEN.clear()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(driver.serve)
            driver.queue_root(make_root(one_out.fn, (1,), _run()))
            await hooks.until(lambda: (True, "r1") in hooks.wants)
            driver.stop()
            if isinstance(driver, ThreadCompute):
                nursery.cancel_scope.cancel()  # its serve runs until cancelled
    # serve returned: the compute side unwound from inside the waiting frame.
