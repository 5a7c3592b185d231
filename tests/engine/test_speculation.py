"""Inlets and abort on the compute side (engine/speculation.py): a child's exception handled in
its spawner's frame, and abort() of a frame's children wherever they are — queued, stolen,
stolen then taken back, running here as a stolen job of a victim that aborted it."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from satind import JobAborted, RemoteJobError, abort, register_type, spawnable, sync
from satind.config import EngineConfig
from satind.engine import worker as worker_mod
from satind.engine.frames import Cancel, ChildResult, JobArrived, make_root
from satind.engine.worker import Worker
from satind.work.errors import error_info, exception_from
from satind.work.jobs import Job, RunState
from tests.engine.test_worker import Hooks


class Found(Exception):
    """A search result travelling to the spawner's inlet, with a field."""

    def __init__(self, score: int) -> None:
        super().__init__(f"found {score}")
        self.score = score


register_type(Found, 40901, lambda e: e.score, Found)


def _run() -> RunState:
    return RunState("r1", "test", 0.25)


@spawnable
def leaf(i: int) -> int:
    if i % 3 == 0:
        raise Found(i)
    return i


def test_an_inlet_runs_in_the_spawners_frame_at_its_sync_and_its_value_is_the_result(
    worker: Worker,
) -> None:
    trail: list[str] = []

    @spawnable
    def spawner() -> list[int]:
        best = -1

        def inlet(exc: Exception) -> int:
            nonlocal best
            assert isinstance(exc, Found)
            # The spawner's frame is the current one while its handler runs.
            assert worker_mod.CURRENT is not None and worker_mod.CURRENT.current.fn is spawner.fn
            trail.append(f"inlet {exc.score}")
            best = max(best, exc.score)
            return -exc.score

        handles = [leaf.spawn_inlet(inlet, i) for i in range(5)]
        trail.append("spawned")
        sync()
        trail.append("synced")
        return [h.result() for h in handles] + [best]

    root = make_root(spawner.fn, (), _run())
    worker.run_job(root)
    assert root.error is None
    # Children 0 and 3 raised Found: their handlers ran during the sync, never before it
    # (the spawner was running) nor after it.
    assert trail[0] == "spawned" and trail[-1] == "synced"
    assert sorted(trail[1:-1]) == ["inlet 0", "inlet 3"]
    assert root.value.decode() == [0, 1, 2, -3, 4, 3]


def test_an_inlet_may_spawn_and_the_same_sync_waits_for_its_spawns(worker: Worker) -> None:
    @spawnable
    def spawner() -> int:
        extra: list[Any] = []

        def inlet(exc: Exception) -> None:
            extra.append(leaf.spawn(100 + len(extra)))

        leaf.spawn_inlet(inlet, 3)
        leaf.spawn_inlet(inlet, 6)
        sync()
        return sum(h.result() for h in extra)

    root = make_root(spawner.fn, (), _run())
    worker.run_job(root)
    assert root.value.decode() == 100 + 101


def test_abort_drops_the_queued_children_and_their_result_says_so(worker: Worker) -> None:
    ran: list[int] = []

    @spawnable
    def step(i: int) -> int:
        ran.append(i)
        if i == 7:
            raise Found(i)
        return i

    @spawnable
    def search() -> int:
        found: list[int] = []

        def inlet(exc: Exception) -> None:
            assert isinstance(exc, Found)
            found.append(exc.score)
            abort()

        handles = [step.spawn_inlet(inlet, i) for i in range(10)]
        sync()
        with pytest.raises(JobAborted):
            handles[0].result()
        return found[0]

    run = _run()
    root = make_root(search.fn, (), run)
    worker.run_job(root)
    assert root.value.decode() == 7
    # Newest first: 9, 8 and 7 ran; 7 aborted the seven children still queued.
    assert ran == [9, 8, 7]
    assert run.aborts == 1 and run.jobs_cancelled == 7
    assert len(worker.queue) == 0


def test_an_inlet_that_raises_aborts_the_other_children_and_leaves_through_sync(
    worker: Worker,
) -> None:
    ran: list[int] = []

    @spawnable
    def step(i: int) -> int:
        ran.append(i)
        if i == 8:
            raise Found(i)
        return i

    @spawnable
    def search() -> int:
        def inlet(exc: Exception) -> None:
            raise exc  # pass it up: the other children are useless now

        for i in range(10):
            step.spawn_inlet(inlet, i)
        sync()
        return -1

    @spawnable
    def top() -> int:
        def inlet(exc: Exception) -> int:
            assert isinstance(exc, Found)
            return exc.score

        h = search.spawn_inlet(inlet)
        sync()
        return int(h.result())

    run = _run()
    root = make_root(top.fn, (), run)
    worker.run_job(root)
    assert root.value.decode() == 8
    assert ran == [9, 8] and run.jobs_cancelled == 8


def test_an_inlet_raising_after_the_spawners_code_ended_fails_the_spawner(worker: Worker) -> None:
    @spawnable
    def spawner() -> int:
        def inlet(exc: Exception) -> None:
            raise RuntimeError("from the inlet")

        leaf.spawn_inlet(inlet, 3)
        return 5  # no sync: the implicit sync at the end runs the inlet

    root = make_root(spawner.fn, (), _run())
    worker.run_job(root)
    assert isinstance(root.error, RuntimeError) and "from the inlet" in str(root.error)


def test_a_handler_may_sync_and_the_handlers_ready_meanwhile_run_after_it(worker: Worker) -> None:
    trail: list[str] = []

    @spawnable
    def spawner() -> list[str]:
        def inlet(exc: Exception) -> None:
            assert isinstance(exc, Found)
            trail.append(f"begin {exc.score}")
            if exc.score == 3:
                leaf.spawn_inlet(inlet, 6)  # raises too: its handler must not run in here
                sync()
            trail.append(f"end {exc.score}")

        leaf.spawn_inlet(inlet, 3)
        sync()
        return trail

    root = make_root(spawner.fn, (), _run())
    worker.run_job(root)
    assert root.value.decode() == ["begin 3", "end 3", "begin 6", "end 6"]


def test_a_stolen_child_is_aborted_through_the_network_side_and_its_late_result_dropped() -> None:
    hooks = Hooks()
    w = Worker(EngineConfig(), hooks)
    stolen: list[Job] = []

    @spawnable
    def search() -> str:
        def inlet(exc: Exception) -> str:
            abort()
            return "found"

        a = leaf.spawn_inlet(inlet, 1)  # oldest: a thief takes it
        b = leaf.spawn_inlet(inlet, 3)
        taken = w.queue.steal()
        assert taken is a
        stolen.append(taken)
        sync()  # b raises Found, its inlet aborts a, which is out: sync does not wait for it
        with pytest.raises(JobAborted):
            a.result()
        return str(b.result())

    run = _run()
    root = make_root(search.fn, (), run)
    worker_mod.CURRENT = w
    try:
        w.run_job(root)
        assert root.value.decode() == "found"
        # The network side was told (it sends the thief an Abort); a late result, and the
        # same job taken back from a thief that died, are dropped.
        events = hooks.drained()
        assert ("aborted", root) in events
        w.post(ChildResult(stolen[0], 1, None))
        w.post(JobArrived(stolen[0]))
        w.drain()
        assert len(w.queue) == 0 and root.pending == 0
        with pytest.raises(JobAborted):
            stolen[0].result()
        assert run.aborts == 1 and run.jobs_cancelled == 0  # it was counted by its thief
    finally:
        worker_mod.CURRENT = None


def test_a_remote_exception_of_a_registered_type_reaches_the_inlet_as_itself() -> None:
    hooks = Hooks()
    w = Worker(EngineConfig(), hooks)
    seen: list[Any] = []

    @spawnable
    def search() -> int:
        def inlet(exc: Exception) -> int:
            seen.append(exc)
            assert isinstance(exc, Found)
            return exc.score

        h = leaf.spawn_inlet(inlet, 1)
        taken = w.queue.steal()
        assert taken is h
        # As the network side would deliver it: rebuilt from what crossed the wire.
        w.post(ChildResult(taken, None, exception_from(error_info(Found(42)))))
        sync()
        return int(h.result())

    root = make_root(search.fn, (), _run())
    worker_mod.CURRENT = w
    try:
        w.run_job(root)
    finally:
        worker_mod.CURRENT = None
    assert root.value.decode() == 42
    assert type(seen[0]) is Found and seen[0].score == 42


def test_exceptions_cross_as_themselves_when_registered_else_as_remote_errors() -> None:
    class Unregistered(Exception):
        pass

    back = exception_from(error_info(Found(7)))
    assert type(back) is Found and back.score == 7
    assert exception_from(error_info(KeyError("k"))).__class__ is KeyError
    other = exception_from(error_info(Unregistered("x")))
    assert isinstance(other, RemoteJobError) and "Unregistered" in other.type_name


def _stolen_job(fn: Any, args: tuple[Any, ...], run: RunState) -> Job:
    job = Job(fn, args, None, 0, run, 0.1)
    job.set_path(b"\x01")
    job.origin = "victim"
    return job


def test_a_cancelled_stolen_job_unwinds_at_its_next_spawn_keeping_nothing() -> None:
    hooks = Hooks()
    w = Worker(EngineConfig(), hooks)
    release = threading.Event()
    running = threading.Event()
    spawned_after: list[int] = []

    @spawnable
    def slow(i: int) -> int:
        running.set()
        release.wait(10)
        return i

    @spawnable
    def big(n: int) -> int:
        handles = [slow.spawn(0)]
        sync()  # runs slow(0), which blocks until the Cancel is posted
        for i in range(1, n):
            handles.append(slow.spawn(i))  # the next spawn unwinds
            spawned_after.append(i)
        sync()
        return sum(h.result() for h in handles)

    run = _run()
    job = _stolen_job(big.fn, (10,), run)
    w.post(JobArrived(job))
    t = threading.Thread(target=w.run_forever, daemon=True)
    t.start()
    try:
        assert running.wait(10)
        w.post(Cancel(job))
        release.set()
        assert hooks.next("dropped") is job
        events = [kind for kind, _ in hooks.drained()]
        assert "finished" not in events and "orphan" not in events
        assert spawned_after == []  # it unwound at its first spawn after the cancel
        assert run.jobs_cancelled == 1 and run.abort_wasted_s > 0
        assert w.max_pending == w.pending_limit  # spawns are cheap again
        assert job not in w.cut  # nothing of it stays on a long-lived peer
    finally:
        w.stop()
        t.join(10)
    assert len(w.queue) == 0 and w.nesting == 0


def test_a_cancelled_job_still_queued_is_dropped() -> None:
    hooks = Hooks()
    w = Worker(EngineConfig(), hooks)
    run = _run()
    job = _stolen_job(leaf.fn, (1,), run)
    w.queue.push(job)
    w.post(Cancel(job))
    worker_mod.CURRENT = w
    try:
        w.drain()
    finally:
        worker_mod.CURRENT = None
    assert hooks.next("dropped") is job
    assert len(w.queue) == 0 and run.jobs_cancelled == 1


def test_without_satind_an_inlet_runs_at_once_and_abort_does_nothing() -> None:
    assert worker_mod.CURRENT is None
    got: list[int] = []

    def inlet(exc: Exception) -> int:
        assert isinstance(exc, Found)
        got.append(exc.score)
        abort()
        return 0

    handles = [leaf.spawn_inlet(inlet, i) for i in range(4)]
    sync()
    assert [h.result() for h in handles] == [0, 1, 2, 0] and got == [0, 3]


def test_a_child_that_raises_and_whose_sync_raises_too_has_its_inlet_run_once(
    worker: Worker,
) -> None:
    # The child's own code raises with a grandchild pending; its implicit sync then runs the
    # grandchild's handler, which raises as well. The child failed twice over, but its
    # spawner's handler runs once, with the last exception.
    calls: list[str] = []

    @spawnable
    def grandchild() -> None:
        raise ValueError("grandchild")

    @spawnable
    def child() -> None:
        def reraise(exc: Exception) -> None:
            raise RuntimeError("from the grandchild's handler")

        grandchild.spawn_inlet(reraise)
        raise KeyError("child")

    def handler(exc: Exception) -> str:
        calls.append(repr(exc))
        return "handled"

    @spawnable
    def spawner() -> str:
        handle = child.spawn_inlet(handler)
        sync()
        return str(handle.result())

    root = make_root(spawner.fn, (), _run())
    worker.run_job(root)
    assert root.error is None and root.value.decode() == "handled"
    assert calls == ['RuntimeError("from the grandchild\'s handler")']
    assert not worker.ready


def test_a_job_run_inside_a_handlers_sync_runs_its_own_childrens_handlers(
    worker: Worker,
) -> None:
    # A handler spawns and syncs; the job it waits for runs inside that sync, and that job's
    # own child raises into an inlet. Only the handler's frame defers its other handlers
    # while the handler runs; the inner job's handler runs at the inner job's sync.
    @spawnable
    def deep() -> None:
        raise ValueError("deep")

    @spawnable
    def inner() -> int:
        handle = deep.spawn_inlet(lambda exc: 42)
        sync()
        return int(handle.result())

    @spawnable
    def failing() -> None:
        raise KeyError("failing")

    @spawnable
    def spawner() -> list[int]:
        got: list[int] = []

        def handler(exc: Exception) -> str:
            handle = inner.spawn()
            sync()
            got.append(handle.result())
            return "handled"

        failing.spawn_inlet(handler)
        sync()
        return got

    root = make_root(spawner.fn, (), _run())
    worker.run_job(root)
    assert root.error is None and root.value.decode() == [42]
    assert not worker.ready and worker.handler_frame is None
