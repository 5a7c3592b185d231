"""The compute side: spawn/sync semantics, exceptions, stolen children, the mailbox."""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from typing import Any

import pytest

from satind import ResultNotReady, spawnable, sync
from satind.config import EngineConfig
from satind.engine import worker as worker_mod
from satind.engine.frames import (
    ChildResult,
    JobArrived,
    Orphaned,
    Snapshot,
    Wakeup,
    make_root,
)
from satind.engine.worker import Worker
from satind.net.codec import Encoded
from satind.net.messages import ReplicaReply, SharedDigest, SharedUpdates
from satind.net.records import SharedUpdate
from satind.work.errors import LimitExceeded
from satind.work.jobs import ROOT_PATH, Job, RunState, child_path
from satind.work.reports import Report
from tests.engine.reports import to_method


class Hooks:
    def __init__(self) -> None:
        self.events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()

    def report(self, event: Report) -> None:
        to_method(self, event)

    def want_work(self, wanted: bool, run_id: str = "") -> None:
        self.events.put(("want", wanted))
        if wanted:
            self.events.put(("want_run", run_id))

    def job_finished(self, job: Job) -> None:
        self.events.put(("finished", job))

    def orphan_hit(self, job: Job, holder: str) -> None:
        self.events.put(("hit", job))

    def orphan_result(self, job: Job, value: bytes) -> None:
        self.events.put(("orphan", job))

    def subtree_dropped(self, job: Job) -> None:
        self.events.put(("dropped", job))

    def children_aborted(self, frame: Job) -> None:
        self.events.put(("aborted", frame))

    def shared_update(self, update: SharedUpdate) -> None:
        self.events.put(("update", update))

    def shared_send(self, thief: str, reply: ReplicaReply | SharedDigest | SharedUpdates) -> None:
        self.events.put(("sent", (thief, reply)))

    def guard_waiting(self, job: Job, waiting: bool = True) -> None:
        self.events.put(("guard", (job, waiting)))

    def result_waiting(self, job: Job, sender: str, waiting: bool = True) -> None:
        self.events.put(("held", (job, sender, waiting)))

    def task_ready(self, job: Job) -> None:
        self.events.put(("task", job))

    def barrier(self, run_id: str, iteration: int, state: bytes) -> None:
        self.events.put(("barrier", (run_id, iteration, state)))

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
        self.events.put(("logged", job))

    def snapshot_taken(self) -> None:
        self.events.put(("snapshot", None))

    def drained(self) -> list[tuple[str, Any]]:
        out = []
        while not self.events.empty():
            out.append(self.events.get())
        return out

    def next(self, kind: str, timeout: float = 10.0) -> Any:
        while True:
            got, value = self.events.get(timeout=timeout)
            if got == kind:
                return value


def value(job: Job) -> object:
    """A finished job's value: a job without a local parent hands its value over encoded."""
    got = job.result()
    return got.decode() if isinstance(got, Encoded) else got


@spawnable
def fib(n: int) -> int:
    if n < 2:
        return n
    a = fib.spawn(n - 1)
    b = fib.spawn(n - 2)
    sync()
    return a.result() + b.result()


@spawnable
def fail(n: int) -> int:
    if n == 0:
        raise ValueError("leaf failed")
    h = fail.spawn(n - 1)
    sync()
    return h.result()


def _run() -> RunState:
    return RunState("r1", "test", 0.5)


def test_fib_runs_and_counts(worker: Worker) -> None:
    run = _run()
    root = make_root(fib.fn, (15,), run)
    worker.run_job(root)
    assert value(root) == 610
    assert run.jobs_run == run.spawns + 1
    assert run.syncs == run.spawns // 2
    assert run.progress == pytest.approx(1.0)


def _leaves(n: int) -> int:
    return 1 if n < 2 else _leaves(n - 1) + _leaves(n - 2)


def test_leaves_below_a_restarted_job_count_as_redone(worker: Worker) -> None:
    run = _run()
    run.redo = [child_path(ROOT_PATH, 0)]  # as if fib(14), the first child, were restarted
    root = make_root(fib.fn, (15,), run)
    worker.run_job(root)
    assert value(root) == 610
    assert run.leaves_run == _leaves(15)
    assert run.leaves_redone == _leaves(14)


def test_a_job_restarted_after_its_thief_died_marks_its_subtree_redone(worker: Worker) -> None:
    """The network side says so in the job's message; the compute thread keeps the list."""
    run = _run()
    job = make_root(fib.fn, (6,), run)
    worker.post(JobArrived(job, restarted=True))
    worker.drain()
    assert run.redo == [job.path]
    queued = worker.queue.pop()
    assert queued is job
    worker.run_job(job)
    assert value(job) == 8 and run.leaves_redone == _leaves(6)


def test_with_log_all_every_finished_job_is_reported() -> None:
    hooks = Hooks()
    w = Worker(EngineConfig(), hooks)
    w.log_all = True  # checkpoint policy "sel"
    run = _run()
    root = make_root(fib.fn, (10,), run)
    worker_mod.CURRENT = w
    try:
        w.run_job(root)
    finally:
        worker_mod.CURRENT = None
    logged = [job for kind, job in hooks.drained() if kind == "logged"]
    assert len(logged) == run.jobs_run and root in logged
    assert all(job.done for job in logged)


def test_a_snapshot_logs_the_finished_children_of_every_open_frame_once() -> None:
    # Checkpoint policy "tic" (kaapi §3.3): a checkpoint saves this peer's part of the
    # computation, the results its open frames hold; a later one adds only what is new.
    hooks = Hooks()
    w = Worker(EngineConfig(), hooks)

    @spawnable
    def leaf(i: int) -> int:
        if i in (2, 11):
            w.post(Snapshot())  # handled at the next sync: in outer's frame, then in mid's
        return 10 * i

    @spawnable
    def mid() -> int:
        a, b = leaf.spawn(10), leaf.spawn(11)
        sync()
        return a.result() + b.result()

    @spawnable
    def outer() -> int:
        # Children run newest first: leaf 2, leaf 1, then mid (whose snapshots see them).
        handles = [mid.spawn(), leaf.spawn(1), leaf.spawn(2)]
        sync()
        return sum(h.result() for h in handles)

    root = make_root(outer.fn, (), _run())
    worker_mod.CURRENT = w
    try:
        w.run_job(root)
    finally:
        worker_mod.CURRENT = None
    events = [(kind, job.value if job else 0) for kind, job in hooks.drained()]
    snaps = [i for i, (kind, _) in enumerate(events) if kind == "snapshot"]
    assert len(snaps) == 2
    first = sorted(int(v) for kind, v in events[: snaps[0]] if kind == "logged")
    second = sorted(int(v) for kind, v in events[snaps[0] : snaps[1]] if kind == "logged")
    assert first == [20]  # outer's leaf 2
    # mid's leaf 11, and down the stack in outer's frame only what is new there: leaf 1.
    assert second == [10, 110]
    assert value(root) == 240 and w.under == {}


def test_child_exception_reaches_the_parent(worker: Worker) -> None:
    root = make_root(fail.fn, (5,), _run())
    worker.run_job(root)
    assert isinstance(root.error, ValueError)
    with pytest.raises(ValueError, match="leaf failed"):
        value(root)


def test_job_without_sync_is_synced_implicitly(worker: Worker) -> None:
    seen: list[int] = []

    @spawnable
    def record(i: int) -> None:
        seen.append(i)

    @spawnable
    def parent() -> str:
        for i in range(3):
            record.spawn(i)
        return "returned before its children"

    run = _run()
    root = make_root(parent.fn, (), run)
    worker.run_job(root)
    assert value(root) == "returned before its children"
    assert sorted(seen) == [0, 1, 2]
    assert len(worker.queue) == 0


def test_result_before_sync_is_an_error(worker: Worker) -> None:
    @spawnable
    def eager() -> int:
        h = fib.spawn(3)
        return int(h.result())

    root = make_root(eager.fn, (), _run())
    worker.run_job(root)
    assert isinstance(root.error, ResultNotReady)


def _run_stolen(w: Worker, root: Job, fn: Any, args: tuple[Any, ...]) -> None:
    """Run ``root`` as ``fn(*args)`` stolen from a peer (its origin), with ``w`` current."""
    root.fn, root.args = fn, args
    root.origin = "gone-peer"
    worker_mod.CURRENT = w
    try:
        w.run_job(root)
    finally:
        worker_mod.CURRENT = None


def test_an_orphaned_frame_keeps_its_finished_children_and_drops_the_rest() -> None:
    # A job stolen from a peer that then died (satin-ft §3.2): when the peer learns it, the
    # job's frame is aborted at its next sync; the children that finished are kept as
    # orphans, the ones still queued go, and the job itself reports nothing.
    hooks = Hooks()
    w = Worker(EngineConfig(), hooks)
    root = make_root(lambda: None, (), _run())  # replaced below: the frame needs the worker

    @spawnable
    def leaf(i: int) -> int:
        if i == 5:  # news of the death arrives while child 5 runs
            w.post(Orphaned(root))
        return 10 * i

    @spawnable
    def split(n: int) -> int:
        handles = [leaf.spawn(i) for i in range(n)]
        sync()
        return sum(h.result() for h in handles)

    _run_stolen(w, root, split.fn, (8,))
    events = hooks.drained()
    # Children run newest first: 7, 6 and 5 finished; 4 down to 0 were still queued.
    kept = sorted(job.value for kind, job in events if kind == "orphan")
    assert kept == [50, 60, 70]
    assert not any(kind == "finished" for kind, _ in events)
    assert not root.done and len(w.queue) == 0 and w.nesting == 0
    # A result for the subtree that comes in later (a child another peer ran) is kept too,
    # and a job of the subtree that turns up again (restarted) is dropped.
    child = Job(leaf.fn, (1,), root, 1, root.run, 0.1)
    w.post(ChildResult(child, 10, None))
    w.drain()
    assert [(k, j.value) for k, j in hooks.drained()] == [("orphan", 10)]
    w.post(JobArrived(Job(leaf.fn, (0,), root, 0, root.run, 0.1)))
    w.drain()
    assert len(w.queue) == 0 and hooks.drained() == []


@pytest.mark.parametrize(("keep", "kept_values"), [(1000, [0, 10, 20, 110]), (2, [110])])
def test_a_frame_past_keep_synced_children_drops_what_it_synced(
    keep: int, kept_values: list[int]
) -> None:
    # A frame keeps its finished children for reuse if it is aborted (satin-ft §3.2), also
    # those it already synced; past engine.keep_synced_children spawns it drops them as each
    # sync returns, so a loop of spawn+sync does not hold every child it ever had.
    hooks = Hooks()
    w = Worker(dataclasses.replace(EngineConfig(), keep_synced_children=keep), hooks)
    root = make_root(lambda: None, (), _run())

    @spawnable
    def leaf(i: int) -> int:
        if i == 11:  # the second phase: news of the death arrives while it runs
            w.post(Orphaned(root))
        return 10 * i

    @spawnable
    def phases() -> int:
        first = [leaf.spawn(i) for i in range(3)]
        sync()
        second = [leaf.spawn(i) for i in (9, 10, 11)]
        sync()
        return sum(h.result() for h in first + second)

    _run_stolen(w, root, phases.fn, ())
    kept = sorted(job.value for kind, job in hooks.drained() if kind == "orphan")
    # The second phase runs newest first: 11 finishes, and the frame is cut before 10 and 9
    # start. With the default the first phase's children are kept beside it; a frame that
    # had spawned more than 2 dropped them when its first sync returned.
    assert kept == kept_values


def test_without_satind_spawn_is_a_plain_call() -> None:
    assert worker_mod.CURRENT is None
    assert fib(20) == 6765
    h = fib.spawn(10)
    sync()
    assert h.result() == 55
    handle = fail.spawn(2)  # the exception waits for result(), as with satind
    with pytest.raises(ValueError):
        handle.result()


def _thread(w: Worker, job: Job) -> threading.Thread:
    def body() -> None:
        worker_mod.CURRENT = w
        try:
            w.run_job(job)
        finally:
            worker_mod.CURRENT = None

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t


def test_stolen_child_result_completes_the_frame() -> None:
    hooks = Hooks()
    w = Worker(EngineConfig(), hooks)
    release = threading.Event()
    stolen: list[Job] = []

    @spawnable
    def slow(x: int) -> int:
        release.wait(10)
        return x

    @spawnable
    def two() -> int:
        a = slow.spawn(1)  # oldest: at the tail, where a thief takes it
        b = slow.spawn(2)
        sync()
        return a.result() * 10 + b.result()

    run = _run()
    root = make_root(two.fn, (), run)
    # The root's own children are pushed while it runs; steal the oldest as a thief would,
    # while the newest blocks the compute thread.
    t = _thread(w, root)
    for _ in range(1000):
        if len(w.queue) == 1:
            break
        threading.Event().wait(0.005)
    job = w.queue.steal()
    assert job is not None and job.args == (1,)
    stolen.append(job)
    release.set()
    # Out of local work with a child out: the worker asks for work ...
    assert hooks.next("want") is True
    # ... runs a job stolen for it meanwhile (its parent is elsewhere) ...
    other = Job(fib.fn, (10,), None, 0, run, 0.1)
    other.set_path(b"\x09")
    other.origin = "p7"
    w.post(JobArrived(other))
    assert hooks.next("finished") is other and value(other) == 55
    # ... and completes when the stolen child's result arrives, applied once.
    w.post(ChildResult(stolen[0], 4, None))
    w.post(ChildResult(stolen[0], 999, None))
    assert hooks.next("finished") is root
    t.join(10)
    assert value(root) == 42


def test_stolen_child_exception_is_raised_by_result() -> None:
    hooks = Hooks()
    w = Worker(EngineConfig(), hooks)

    @spawnable
    def one() -> int:
        h = fib.spawn(3)
        # Take our own child away, as a thief would, before syncing.
        taken = w.queue.steal()
        assert taken is not None
        w.post(ChildResult(taken, None, KeyError("remote")))
        sync()
        return int(h.result())

    root = make_root(one.fn, (), _run())
    t = _thread(w, root)
    assert hooks.next("finished") is root
    t.join(10)
    assert isinstance(root.error, KeyError)


def test_no_stealing_past_the_nesting_limit() -> None:
    hooks = Hooks()
    w = Worker(EngineConfig(max_steal_nesting=1), hooks)  # the root itself is nesting 1

    @spawnable
    def one() -> int:
        h = fib.spawn(3)
        taken = w.queue.steal()
        assert taken is not None
        w.post(ChildResult(taken, 2, None))
        sync()
        return int(h.result())

    root = make_root(one.fn, (), _run())
    t = _thread(w, root)
    assert hooks.next("finished") is root
    t.join(10)
    assert value(root) == 2
    # It waited for the result without asking for work.
    drained = []
    while not hooks.events.empty():
        drained.append(hooks.events.get()[0])
    assert "want" not in drained


def test_stop_unwinds_an_idle_worker() -> None:
    w = Worker(EngineConfig(), Hooks())
    t = threading.Thread(target=w.run_forever, daemon=True)
    t.start()
    w.stop()
    t.join(10)
    assert not t.is_alive()
    assert worker_mod.CURRENT is None


def test_a_restarted_job_of_another_run_is_not_started_in_a_frames_sync() -> None:
    # Restarted work lands in whatever queue restart gives it: here a job of run A, while a
    # stolen job of run B waits in its sync for a child out on a thief. Started there, A's
    # job would hold B's frame until it ended (and an abort of A would unwind through it);
    # it stays queued, and B's frame runs its own run's work beneath it.
    hooks = Hooks()
    w = Worker(EngineConfig(), hooks)
    run_a = _run()
    a_parent = Job(fib.fn, (9,), None, 0, run_a, 0.5)  # A's frame it belongs to, elsewhere
    started: list[str] = []

    @spawnable
    def a_job() -> int:
        started.append("a")
        return 1

    @spawnable
    def b_job() -> int:
        out = fib.spawn(10)
        mine = fib.spawn(5)
        taken = w.queue.steal()  # a thief takes B's first child: B's sync waits for it
        assert taken is out
        w.queue.push(Job(a_job.fn, (), a_parent, 0, run_a, 0.25))  # restarted, on top
        w.post(ChildResult(taken, 55, None))  # the thief's result, in the mailbox
        sync()
        return int(out.result()) + int(mine.result())

    root = make_root(b_job.fn, (), RunState("r2", "test", 0.5))
    root.origin = "victim"
    worker_mod.CURRENT = w
    try:
        w.run_job(root)
    finally:
        worker_mod.CURRENT = None
    assert value(root) == 60 and w.nesting == 0 and w.under == {}
    assert started == [] and len(w.queue) == 1  # A's job waits for a thief or the top
    assert [job for kind, job in hooks.drained() if kind == "finished"] == [root]


def test_a_frame_waiting_on_an_aborted_run_unwinds_and_reports_nothing() -> None:
    hooks = Hooks()
    w = Worker(EngineConfig(), hooks)
    run = _run()

    @spawnable
    def waits() -> int:
        h = fib.spawn(3)
        taken = w.queue.steal()  # a thief takes the child; its result will never come
        assert taken is not None
        sync()
        return int(h.result())

    stolen_here = Job(waits.fn, (), None, 0, run, 0.5)
    stolen_here.set_path(b"\x01")
    stolen_here.origin = "elsewhere"
    thread = threading.Thread(target=w.run_forever, daemon=True)
    thread.start()
    w.post(JobArrived(stolen_here))
    assert hooks.next("want") is True  # it waits for the stolen child, asking for work
    run.aborted = True  # the run ended elsewhere (its result came from a duplicate)
    w.post(Wakeup())
    # The worker gives up that frame and is free again: it runs the next job at once.
    other = make_root(fib.fn, (12,), RunState("r2", "test", 0.5))
    w.post(JobArrived(other))
    assert hooks.next("finished") is other and value(other) == 144
    assert not stolen_here.done and w.nesting == 0
    w.stop()
    thread.join(10)


def test_a_sync_waiting_for_stolen_children_asks_only_for_its_runs_work() -> None:
    # A job of another run started on top of a waiting frame would hold that frame until it
    # ended (a blocking leaf of a bad run made a good run wait for it): the wait names its run.
    hooks = Hooks()
    w = Worker(EngineConfig(), hooks)

    @spawnable
    def one() -> int:
        h = fib.spawn(3)
        taken = w.queue.steal()  # a thief took our only child
        assert taken is not None
        stolen.append(taken)
        sync()
        return int(h.result())

    stolen: list[Job] = []
    t = threading.Thread(target=w.run_forever, daemon=True)
    t.start()
    # Idle at the top, with nothing on its stack, it takes any work.
    assert hooks.next("want_run") == ""
    root = make_root(one.fn, (), _run())
    w.post(JobArrived(root))
    assert hooks.next("want_run") == "r1"
    w.post(ChildResult(stolen[0], 2, None))
    assert hooks.next("finished") is root
    w.stop()
    t.join(10)
    assert value(root) == 2


class WaitingFrame:
    """A compute thread whose one frame (run r1) waits for a child a thief took, and a root
    of run r2, ``second``, not yet queued; ``started`` records what ran of them."""

    def __init__(self, cfg: EngineConfig) -> None:
        self.hooks = Hooks()
        self.w = w = Worker(cfg, self.hooks)
        self.started: list[str] = []
        self.stolen: list[Job] = []

        @spawnable
        def one() -> int:
            h = fib.spawn(3)
            taken = w.queue.steal()
            assert taken is not None
            self.stolen.append(taken)
            sync()
            self.started.append("one resumed")
            return int(h.result())

        @spawnable
        def other() -> int:
            self.started.append("other")
            return 7

        self.thread = threading.Thread(target=w.run_forever, daemon=True)
        self.thread.start()
        assert self.hooks.next("want_run") == ""  # idle
        self.root = make_root(one.fn, (), _run())
        w.post(JobArrived(self.root))
        assert self.hooks.next("want_run") == "r1"  # its frame waits, asking for r1's work
        self.second = make_root(other.fn, (), RunState("r2", "test", 0.5))

    def stop(self) -> None:
        self.w.stop()
        self.thread.join(10)


def test_a_root_queued_while_a_frame_waits_is_not_started_on_top_of_it() -> None:
    # Roots go into the queue (idle peers steal them from there); a frame waiting for its
    # stolen children must not run another run's root on top of itself at once, or it would
    # wait for that whole run before its own could finish: only a root that has waited
    # ``nest_roots_after_s`` (2 s by default) for a thief is (the tests below).
    f = WaitingFrame(EngineConfig())
    f.w.queue_root(f.second)
    time.sleep(0.3)  # it would have run within microseconds
    assert f.started == [] and len(f.w.queue) == 1
    f.w.post(ChildResult(f.stolen[0], 2, None))
    assert f.hooks.next("finished") is f.root
    assert f.hooks.next("finished") is f.second and value(f.second) == 7
    f.stop()


def test_a_root_that_waited_past_its_time_starts_on_top_of_a_waiting_frame() -> None:
    # Every peer busy with one run (here: this frame waits for a child a thief took) and no
    # thief for the next run's root: past nest_roots_after_s the root starts on top of the
    # frame, and the frame goes on once it has ended.
    f = WaitingFrame(EngineConfig(nest_roots_after_s=0.2, wait_poll_s=0.05))
    queued = time.monotonic()
    f.w.queue_root(f.second)
    assert f.hooks.next("finished") is f.second and value(f.second) == 7
    assert time.monotonic() - queued >= 0.2  # not before its time
    f.w.post(ChildResult(f.stolen[0], 2, None))
    assert f.hooks.next("finished") is f.root and value(f.root) == 2
    assert f.started == ["other", "one resumed"]
    f.stop()


def test_a_root_that_waited_past_its_time_starts_at_a_busy_frames_next_job() -> None:
    # A frame that always has work of its own (its queued children) never waits, so the
    # root's turn comes at a job boundary: it goes before the frame's next child.
    hooks = Hooks()
    w = Worker(EngineConfig(nest_roots_after_s=0.2), hooks)
    order: list[str] = []

    @spawnable
    def slow(i: int) -> int:
        order.append(f"slow {i}")
        time.sleep(0.05)
        return i

    @spawnable
    def many() -> int:
        handles = [slow.spawn(i) for i in range(20)]
        sync()
        return sum(h.result() for h in handles)

    @spawnable
    def other() -> int:
        order.append("other")
        return 7

    t = threading.Thread(target=w.run_forever, daemon=True)
    t.start()
    assert hooks.next("want_run") == ""
    root = make_root(many.fn, (), _run())
    w.post(JobArrived(root))
    for _ in range(500):  # the first child began
        if order:
            break
        time.sleep(0.01)
    w.queue_root(make_root(other.fn, (), RunState("r2", "test", 0.5)))
    finished = [hooks.next("finished"), hooks.next("finished")]
    assert [value(j) for j in finished] == [7, sum(range(20))]
    at = order.index("other")
    assert 3 <= at < 20, order  # after 0.2 s of 50 ms children, well before the last
    w.stop()
    t.join(10)


def test_a_frame_waiting_for_its_children_runs_a_job_placed_here_for_another_run() -> None:
    # A job a run's master placed on this peer (an SPMD entity job, an iterative task) can run
    # nowhere else, and that run may be what this frame waits for: two SPMD roots on two peers,
    # each waiting for its entities on the other, never ended when each left the other's
    # entity jobs queued (issue 28). Here B's placed job is what delivers A's stolen child's
    # result. A job of another run that a thief may take still waits in the queue.
    hooks = Hooks()
    w = Worker(EngineConfig(), hooks)
    run_b = RunState("r2", "test", 0.5)
    run_b.pushed = True
    started: list[str] = []
    stolen: list[Job] = []

    @spawnable
    def entity_step() -> int:
        started.append("b")
        w.post(ChildResult(stolen[0], 2, None))  # A's child's result comes back meanwhile
        return 5

    @spawnable
    def other() -> int:
        started.append("c")
        return 7

    @spawnable
    def waits() -> int:
        h = fib.spawn(3)
        taken = w.queue.steal()  # a thief took our only child
        assert taken is not None
        stolen.append(taken)
        placed = Job(entity_step.fn, (), None, 0, run_b, 0.25)
        placed.set_path(b"\x05")
        placed.origin = "b/0"  # its run's master pushed it here
        w.queue.push(placed)
        # On top of it, a job of a third run taken back from a dead thief: not placed.
        w.queue.push(Job(other.fn, (), make_root(fib.fn, (9,), run_c), 0, run_c, 0.25))
        sync()
        at_sync.extend(started)  # what ran in this frame's sync
        return int(h.result())

    at_sync: list[str] = []
    run_c = RunState("r3", "test", 0.5)
    root = make_root(waits.fn, (), _run())
    t = threading.Thread(target=w.run_forever, daemon=True)
    t.start()
    try:
        w.post(JobArrived(root))
        finished = hooks.next("finished", timeout=5.0)  # B's placed job, then A's root
        assert getattr(finished.fn, "__name__", "") == "entity_step" and value(finished) == 5
        assert hooks.next("finished", timeout=5.0) is root and value(root) == 2
        assert at_sync == ["b"]  # the third run's job waited for the frame to end
    finally:
        w.stop()
        t.join(10)
    assert not t.is_alive()


def test_a_queued_child_whose_frame_unwound_cannot_kill_the_compute_thread() -> None:
    # A child left queued after its frame unwound (its run aborted while another run's job lay
    # on top of it, or taken back from a dead thief after the unwinding) is popped at the top
    # level; its run's abort reaches it in its own sync. The RunAborted has no frame of its
    # run to unwind to: it escaped run_forever and the compute thread died, leaving a peer
    # alive on the network that never computed again (benchmarks/soak.py: sat beside heat2d,
    # every SPMD run with an entity there stuck).
    hooks = Hooks()
    w = Worker(EngineConfig(), hooks)
    run = _run()
    gone = make_root(fib.fn, (9,), run)  # the frame it belonged to, unwound
    ran = threading.Event()

    @spawnable
    def stranded() -> int:
        ran.set()
        child = fib.spawn(3)
        run.aborted = True  # the run ends elsewhere while it runs (a speculative abort)
        w.post(Wakeup())
        sync()
        return int(child.result())

    t = threading.Thread(target=w.run_forever, daemon=True)
    t.start()
    try:
        w.queue.push(Job(stranded.fn, (), gone, 0, run, 0.25))
        w.post(Wakeup())
        assert ran.wait(5.0)
        other = make_root(fib.fn, (12,), RunState("r2", "test", 0.5))
        w.post(JobArrived(other))
        assert hooks.next("finished", timeout=5.0) is other and value(other) == 144
        assert t.is_alive()
    finally:
        w.stop()
        t.join(10)


@spawnable
def endless(n: int) -> int:
    child = endless.spawn(n + 1)
    sync()
    return int(child.result())


def test_spawns_recursing_without_bound_fail_the_run_at_the_recursion_limit(
    worker: Worker,
) -> None:
    # This thread's recursion limit (a peer's compute thread sets engine.recursion_limit) is
    # met somewhere: in the plugin's code or in the engine's. Either way the job that met it
    # fails with an error naming the setting, its run fails, and nothing is left behind.
    run = _run()
    root = make_root(endless.fn, (0,), run)
    assert _on_a_compute_thread(worker, lambda: worker.run_job(root))
    assert isinstance(root.error, LimitExceeded)
    assert "engine.recursion_limit" in str(root.error)
    assert worker.current is worker.idle_frame and len(worker.queue) == 0
    # The worker is whole: the next run runs.
    again = make_root(fib.fn, (10,), _run())
    worker.run_job(again)
    assert value(again) == 55


def _on_a_compute_thread(worker: Worker, call: Any) -> bool:
    """Run ``call`` on a thread with a peer's compute-thread stack (engine.thread_stack_bytes);
    whether it returned within 30 s.

    The recursion limit (engine.recursion_limit, set process-wide by a Worker) is sized for
    that stack: with the engine compiled (setup.py) a job level is one Python frame, not four,
    so 20,000 levels would overflow the 8 MB stack of an ordinary thread and crash.
    """
    done = threading.Event()

    def body() -> None:
        call()
        done.set()

    previous = threading.stack_size()
    threading.stack_size(worker.cfg.thread_stack_bytes)
    try:
        thread = threading.Thread(target=body, daemon=True)
        thread.start()
    finally:
        threading.stack_size(previous)
    thread.join(30.0)
    return done.is_set()


def _at_depth(depth: int, call: Any) -> None:
    """Run ``call`` with ``depth`` more Python frames below it."""
    if depth:
        _at_depth(depth - 1, call)
    else:
        call()


@pytest.mark.parametrize("start", range(16))
def test_the_recursion_limit_met_at_any_point_of_a_frame_loses_no_job(
    worker: Worker, start: int
) -> None:
    # Where the limit is met depends on how deep the stack already was: in plugin code, in
    # spawn, in sync, or in the engine's own bookkeeping between two jobs. Every point must
    # end the same way (the run fails with LimitExceeded, the worker is whole), never with a
    # popped job lost and its parent waiting forever. A level of ``endless`` is a handful of
    # frames, so sixteen starting depths meet every point of it.
    root = make_root(endless.fn, (0,), _run())
    probe = lambda: _at_depth(start, lambda: worker.run_job(root))  # noqa: E731
    assert _on_a_compute_thread(worker, probe), (
        f"the worker hung after meeting the recursion limit (start {start})"
    )
    assert isinstance(root.error, LimitExceeded)
    assert worker.current is worker.idle_frame and len(worker.queue) == 0


@spawnable
def spawn_many(count: int) -> int:
    handles = [fib.spawn(1) for _ in range(count)]
    sync()
    return sum(h.result() for h in handles)


def test_a_job_spawning_past_the_queue_limit_fails(worker: Worker) -> None:
    worker.max_pending = worker.pending_limit = 100
    root = make_root(spawn_many.fn, (1000,), _run())
    worker.run_job(root)
    assert isinstance(root.error, LimitExceeded)
    assert "engine.max_pending_jobs" in str(root.error)
    assert len(worker.queue) == 0  # what it spawned before the limit ran (implicit sync)


def test_engine_code_failing_on_a_job_fails_that_job_and_loses_nothing(worker: Worker) -> None:
    # A RecursionError at the very bottom of the stack hits engine code, not the plugin's:
    # the job it was running must still finish (with the error), or its parent waits forever.
    # The failure is injected where the engine calls out of itself (a spawn, then the start
    # of the job, look its path up in the run's orphans and tell the peer through a hook): a
    # compiled engine's own methods cannot be replaced from a test.
    calls: list[bytes] = []

    def failing(job: Job, holder: str) -> None:
        calls.append(job.path)
        raise RecursionError("maximum recursion depth exceeded")

    hooks = worker.hooks
    assert isinstance(hooks, Hooks)
    hooks.orphan_hit = failing  # type: ignore[method-assign]
    run = _run()
    run.orphans = {child_path(ROOT_PATH, 1): "elsewhere"}  # the second child's result is kept
    root = make_root(spawn_many.fn, (3,), run)
    worker.run_job(root)
    assert calls and set(calls) == {child_path(ROOT_PATH, 1)}
    assert isinstance(root.error, LimitExceeded)  # the RecursionError, named
    assert worker.current is worker.idle_frame and len(worker.queue) == 0


def test_a_spawn_that_cannot_tell_the_peer_of_a_kept_result_runs_the_job_here(
    worker: Worker,
) -> None:
    # The kept result cannot be fetched (the hook failed at the spawn): the job is queued
    # after all and computed again, never lost or left pending.
    calls: list[bytes] = []

    def fails(job: Job, holder: str) -> None:
        calls.append(job.path)
        run.orphans = None  # and the holder is gone meanwhile: no lookup at the job's start
        raise RecursionError("maximum recursion depth exceeded")

    hooks = worker.hooks
    assert isinstance(hooks, Hooks)
    hooks.orphan_hit = fails  # type: ignore[method-assign]
    run = _run()
    run.orphans = {child_path(ROOT_PATH, 1): "elsewhere"}
    root = make_root(spawn_many.fn, (3,), run)
    worker.run_job(root)
    assert calls == [child_path(ROOT_PATH, 1)]
    assert value(root) == 3
