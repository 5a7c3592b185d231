"""Shared objects on the compute side (satind/shared.py, engine/worker.py): reproducible ids,
references in job arguments, global calls shipped and applied in order per sender, replicas
given and installed in place (another incarnation's as a new object), guards that park a
stolen job until its replica is current."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from satind import SharedObject, global_method, spawnable, sync
from satind.config import Config, EngineConfig
from satind.core import sharing
from satind.core.effects import ToCompute
from satind.core.state import PeerState
from satind.engine import worker as worker_mod
from satind.engine.frames import (
    ChildResult,
    DigestArrived,
    ForgetRun,
    JobArrived,
    ReplicaArrived,
    ReplicaWanted,
    ResultDue,
    UpdatesArrived,
    make_root,
)
from satind.engine.replication import UpdateLog
from satind.engine.worker import Worker
from satind.membership.view import Member, MemberTable
from satind.net.codec import DecodeError, Encoded, decode_value, encode_value
from satind.net.messages import ReplicaReply, SharedDigest, SharedUpdates
from satind.net.records import ReplicaDigest, SharedUpdate
from satind.net.transport import Address
from satind.work.jobs import Job, RunState
from tests.engine.test_worker import Hooks


class Counter(SharedObject):
    def __init__(self) -> None:
        self.total = 0
        self.log: list[int] = []

    @global_method
    def add(self, n: int) -> None:
        self.total += n
        self.log.append(n)


class SharingHooks(Hooks):
    def shared_update(self, update: SharedUpdate) -> None:
        args = decode_value(update.args)
        self.events.put(("update", (update.shared_id, update.method, update.seq, args)))


@pytest.fixture
def worker() -> Iterator[Worker]:
    w = Worker(EngineConfig(), SharingHooks())
    w.replicas.peer_name = "me"
    worker_mod.CURRENT = w
    try:
        yield w
    finally:
        worker_mod.CURRENT = None


def _run() -> RunState:
    return RunState("r1", "test", 0.5)


@spawnable
def use(counter: Counter, n: int) -> int:
    counter.add(n)
    return counter.total


def test_an_object_made_in_a_job_has_a_reproducible_id_and_global_calls_are_shipped(
    worker: Worker,
) -> None:
    made: list[Counter] = []

    @spawnable
    def root() -> int:
        counter = Counter()
        made.append(counter)
        handles = [use.spawn(counter, n) for n in (1, 2, 3)]
        sync()
        return max(h.result() for h in handles)

    for _ in range(2):  # the root run again (a crash, a new epoch) makes the same id
        job = make_root(root.fn, (), _run())
        worker.run_job(job)
    assert made[0]._shared_id == made[1]._shared_id == "r1::0"
    assert worker.shared["r1::0"] is made[1]
    hooks = worker.hooks
    assert isinstance(hooks, SharingHooks)
    updates = [v for k, v in hooks.drained() if k == "update"]
    # Each run numbered its own calls from 1: per object, per sender.
    assert [u[2] for u in updates] == [1, 2, 3, 1, 2, 3]
    assert {u[:2] for u in updates} == {("r1::0", "add")}


def test_a_reference_travels_instead_of_the_state_and_is_resolved_on_arrival(
    worker: Worker,
) -> None:
    counter = Counter()  # outside a job: no id, cannot travel
    with pytest.raises(Exception, match="outside a job"):
        encode_value((counter,))
    job = make_root(lambda: None, (), _run())
    worker.current = job
    try:
        shared = Counter()
    finally:
        worker.current = worker.idle_frame
    refs: list[Any] = []
    data = encode_value((shared, 5), refs=refs)
    assert refs == [["r1::0", f"{Counter.__module__}:Counter"]]
    assert len(data) < 64  # a reference, not the state
    assert decode_value(data) == (shared, 5)
    del worker.shared["r1::0"]
    with pytest.raises(DecodeError, match="no replica"):
        decode_value(data)


def _replica(worker: Worker) -> Counter:
    job = make_root(lambda: None, (), _run())
    worker.current = job
    try:
        return Counter()
    finally:
        worker.current = worker.idle_frame


def _update(seq: int, n: int, sender: str = "p2") -> SharedUpdate:
    return SharedUpdate("r1::0", sender, seq, "add", encode_value((n,)))


def test_updates_apply_in_order_per_sender_once_each(worker: Worker) -> None:
    counter = _replica(worker)
    worker.post(UpdatesArrived([_update(2, 20), _update(1, 10), _update(1, 10)]))
    worker.post(UpdatesArrived([_update(4, 40), _update(1, 7, sender="p3")]))
    worker.drain()
    # 1 then 2 (2 waited for 1), the duplicate of 1 dropped, 4 waits for the missing 3.
    assert counter.log == [10, 20, 7]
    worker.post(UpdatesArrived([_update(3, 30)]))
    worker.drain()
    assert counter.log == [10, 20, 7, 30, 40] and counter.total == 107
    assert counter._shared_seen == {"p2": 4, "p3": 1}


def test_a_run_that_ends_drops_its_replicas_on_the_compute_thread_only(worker: Worker) -> None:
    """The network side never changes the compute side's replicas: forgetting a run posts
    ForgetRun (popping them on the trio thread raced the compute thread's digests)."""
    _replica(worker)
    worker.post(UpdatesArrived([_update(2, 20)]))  # held: waits for call 1
    state = PeerState("me", "c0", Config(), MemberTable(Member("me", Address("h", 1), "c0")), {})
    worker.drain()
    fx = sharing.forget_run(state, "r1")
    assert fx == [ToCompute(ForgetRun("r1"))] and "r1::0" in worker.shared
    worker.post(ForgetRun("r1"))
    worker.drain()
    assert worker.shared == {} and worker.replicas.pending == {}


def test_a_replica_is_given_and_installed_in_place(worker: Worker) -> None:
    counter = _replica(worker)
    counter.add(5)
    worker.post(ReplicaWanted("r1::0", "thief"))
    worker.drain()
    hooks = worker.hooks
    assert isinstance(hooks, SharingHooks)
    thief, reply = hooks.next("sent")
    assert (reply.shared_id, thief, reply.cls) == (
        "r1::0",
        "thief",
        f"{Counter.__module__}:Counter",
    )
    assert reply.state is not None and decode_value(reply.state)["total"] == 5
    assert reply.seen == {"me": 1}
    given = (reply.shared_id, thief, reply.cls)
    # A newer replica from elsewhere replaces the state of the same object; an older one not.
    newer = encode_value({"total": 50, "log": [5, 45]})
    worker.post(ReplicaArrived("r1::0", given[2], newer, {"me": 1, "p2": 1}))
    worker.drain()
    assert worker.shared["r1::0"] is counter and counter.total == 50
    older = encode_value({"total": 0, "log": []})
    worker.post(ReplicaArrived("r1::0", given[2], older, {"me": 1}))
    worker.drain()
    assert counter.total == 50


def test_a_replica_that_lacks_calls_ours_has_seen_is_not_installed(worker: Worker) -> None:
    # Installing it would undo them: our own call 1 among them, whose number our next call
    # would take again (and every receiver drop as a duplicate). Calls held for a gap are
    # applied once an installed replica fills it.
    counter = _replica(worker)
    counter.add(5)
    cls = f"{Counter.__module__}:Counter"
    other = encode_value({"total": 7, "log": [7]})
    worker.post(ReplicaArrived("r1::0", cls, other, {"p2": 1}))
    worker.drain()
    assert counter.total == 5 and counter._shared_seen == {"me": 1}
    counter.add(1)
    hooks = worker.hooks
    assert isinstance(hooks, SharingHooks)
    assert [v[2] for k, v in hooks.drained() if k == "update"] == [1, 2]
    worker.post(UpdatesArrived([_update(3, 30)]))  # p2's third call: waits for 1 and 2
    both = encode_value({"total": 26, "log": [5, 1, 7, 13]})
    worker.post(ReplicaArrived("r1::0", cls, both, {"me": 2, "p2": 2}))
    worker.drain()
    assert counter.total == 56 and counter._shared_seen == {"me": 2, "p2": 3}


def test_a_result_waits_until_the_calls_its_thief_had_applied_are_here(worker: Worker) -> None:
    counter = _replica(worker)
    run = RunState("r1", "test", 0.5)
    parent = make_root(lambda: None, (), run)
    hooks = worker.hooks
    assert isinstance(hooks, SharingHooks)
    kids = [Job(lambda: None, (), parent, i, run, 0.5) for i in range(2)]
    parent.pending = 2
    needs = [ReplicaDigest("r1::0", 0, {"p2": 1, "me": 3})]  # "me": our own, applied
    worker.post(ChildResult(kids[0], Encoded(encode_value(5)), None, needs, "p2"))
    worker.drain()
    assert not kids[0].done and parent.pending == 2
    assert hooks.drained() == [("held", (kids[0], "p2", True))]
    worker.post(UpdatesArrived([_update(1, 10)]))  # p2's call: the result follows it
    worker.drain()
    assert counter.total == 10 and kids[0].result() == 5 and parent.pending == 1
    assert ("held", (kids[0], "p2", False)) in hooks.drained()
    # The sender is gone (ResultDue): applied as it is.
    worker.post(ChildResult(kids[1], Encoded(encode_value(6)), None, [_need(2)], "p2"))
    worker.drain()
    assert not kids[1].done
    worker.post(ResultDue(kids[1]))
    worker.drain()
    assert kids[1].result() == 6 and parent.pending == 0 and not worker.held


def _need(p2_calls: int, incarnation: int = 0) -> ReplicaDigest:
    return ReplicaDigest("r1::0", incarnation, {"p2": p2_calls})


def test_a_result_never_waits_for_another_incarnations_calls(worker: Worker) -> None:
    _replica(worker)
    run = RunState("r1", "test", 0.5)
    parent = make_root(lambda: None, (), run)
    kid = Job(lambda: None, (), parent, 0, run, 0.5)
    parent.pending = 1
    worker.post(ChildResult(kid, Encoded(encode_value(5)), None, [_need(9, 1)], "p2"))
    worker.drain()
    assert kid.result() == 5 and parent.pending == 0


def _digest(seen: dict[str, int], incarnation: int = 0, reply: bool = False) -> DigestArrived:
    return DigestArrived("peer", [ReplicaDigest("r1::0", incarnation, seen)], reply)


def _sent(worker: Worker) -> list[Any]:
    hooks = worker.hooks
    assert isinstance(hooks, SharingHooks)
    out = []
    while not hooks.events.empty():
        kind, value = hooks.events.get()
        if kind == "sent":
            assert value[0] == "peer"
            out.append(value[1])
    return out


def test_a_digest_gets_back_what_the_peer_lacks(worker: Worker) -> None:
    counter = _replica(worker)
    worker.post(UpdatesArrived([_update(1, 10), _update(2, 20), _update(3, 30)]))
    counter.add(5)  # our own call: me 1
    worker.drain()
    _sent(worker)
    # Behind on p2 (has 1 of 3) and on ours: the calls it lacks, from the log; nothing more.
    worker.post(_digest({"p2": 1}))
    worker.drain()
    [msg] = _sent(worker)
    assert isinstance(msg, SharedUpdates)
    assert sorted((u.sender, u.seq) for u in msg.updates) == [("me", 1), ("p2", 2), ("p2", 3)]
    # As far as we are: nothing. Ahead of us (p9): our digest back, once (not to a reply).
    worker.post(_digest({"p2": 3, "me": 1}))
    worker.post(_digest({"p2": 3, "me": 1, "p9": 2}))
    worker.post(_digest({"p2": 3, "me": 1, "p9": 2}, reply=True))
    worker.drain()
    [back] = _sent(worker)
    assert isinstance(back, SharedDigest) and back.reply
    assert back.digests == [ReplicaDigest("r1::0", 0, {"p2": 3, "me": 1})]


def test_a_digest_too_far_behind_or_of_an_older_incarnation_gets_the_replica(
    worker: Worker,
) -> None:
    counter = _replica(worker)
    worker.replicas.log = UpdateLog(max_bytes=100)  # room for one call
    worker.post(UpdatesArrived([_update(1, 10), _update(2, 20)]))
    worker.drain()
    assert list(worker.replicas.log.calls["r1::0"]) == [("p2", 2)]
    worker.post(_digest({}))  # lacks p2's 1, which the log no longer has
    worker.post(_digest({}, incarnation=-1))
    worker.drain()
    for msg in _sent(worker):
        assert isinstance(msg, ReplicaReply) and msg.seen == {"p2": 2}
        assert msg.state is not None and decode_value(msg.state)["total"] == 30
    # A peer as far on one sender but behind us on another, whose log does not cover it, and
    # ahead on a third: a replica would lose its calls, so it gets what the log has and our
    # digest.
    worker.post(_digest({"p7": 1}))
    worker.drain()
    kinds = [type(msg) for msg in _sent(worker)]
    assert kinds == [SharedDigest], kinds
    assert counter.total == 30


class Clock(SharedObject):
    def __init__(self) -> None:
        self.step = 0

    @global_method
    def advance(self, step: int) -> None:
        self.step = max(self.step, step)


@spawnable
def at_step(clock: Clock, step: int) -> int:
    if clock.step != step:
        raise RuntimeError("ran on a stale replica")
    return step


@at_step.guard
def _at_step_guard(clock: Clock, step: int) -> bool:
    return clock.step == step


def test_a_guard_parks_a_stolen_job_until_its_replica_is_current(worker: Worker) -> None:
    job = make_root(lambda: None, (), _run())
    worker.current = job
    try:
        clock = Clock()
    finally:
        worker.current = worker.idle_frame
    stolen = Job(at_step.fn, Encoded(encode_value((clock, 1))), None, 0, job.run, 0.5)
    stolen.set_path(b"\x01")
    stolen.origin = "victim"
    worker.post(JobArrived(stolen))
    worker.drain()
    popped = worker.queue.pop()
    assert popped is stolen
    worker.run_job(stolen)
    hooks = worker.hooks
    assert isinstance(hooks, SharingHooks)
    assert hooks.next("guard") == (stolen, True)
    assert worker.parked == [stolen] and not stolen.done
    # The update that advances the clock arrives: the job is queued, runs, and is right.
    worker.post(
        UpdatesArrived([SharedUpdate(clock._shared_id or "", "p2", 1, "advance", b"\x81\x01")])
    )
    worker.drain()
    assert hooks.next("guard") == (stolen, False)
    assert worker.parked == [] and worker.queue.pop() is stolen
    worker.run_job(stolen)
    assert hooks.next("finished") is stolen and stolen.error is None


SEEN_STEPS: list[int] = []
MIDWAY: list[ReplicaArrived] = []


@spawnable
def subtree(clock: Clock, depth: int, step: int) -> int:
    if depth == 0:
        SEEN_STEPS.append(clock.step)
        if MIDWAY:  # the network side hands the compute side a replica meanwhile
            assert worker_mod.CURRENT is not None
            worker_mod.CURRENT.post(MIDWAY.pop())
        return clock.step
    a = subtree.spawn(clock, depth - 1, step)
    b = subtree.spawn(clock, depth - 1, step)
    sync()
    return a.result() + b.result()


@subtree.guard
def _subtree_guard(clock: Clock, depth: int, step: int) -> bool:
    return clock.step == step


def _clock_at(worker: Worker, step: int, run: RunState) -> Clock:
    holder = make_root(lambda: None, (), run)
    worker.current = holder
    try:
        clock = Clock()
    finally:
        worker.current = worker.idle_frame
    clock.step = step
    return clock


def _new_incarnation(clock: Clock, step: int) -> ReplicaArrived:
    """The replica a new master's epoch (1) made of ``clock`` again, at ``step``."""
    cls = f"{Clock.__module__}:{Clock.__qualname__}"
    state = encode_value({"step": step})
    return ReplicaArrived(clock._shared_id or "", cls, state, {"new": 0}, 1)


def test_a_newer_incarnation_does_not_change_the_state_under_a_running_subtree(
    worker: Worker,
) -> None:
    # A stolen job of step 3 of the old epoch runs; the new master's epoch made the object
    # again at step 0, and its replica arrives between two of the job's leaves. Installed in
    # place, the later leaves read step 0: a result of mixed steps, with no error, that the new
    # epoch reused as an orphan (a Barnes-Hut run answered wrong so once). Every leaf of the
    # job must read the state its guard accepted; the table has the new incarnation after.
    run = RunState("r1", "test", 0.5, 0)
    clock = _clock_at(worker, 3, run)
    stolen = Job(subtree.fn, Encoded(encode_value((clock, 3, 3))), None, 0, run, 0.5)
    stolen.set_path(b"\x01")
    stolen.origin = "victim"
    SEEN_STEPS.clear()
    MIDWAY.append(_new_incarnation(clock, 0))
    worker.post(JobArrived(stolen))
    worker.drain()
    worker.run_job(worker.queue.pop() or stolen)
    assert not MIDWAY, "the replica was not handed over midway"
    assert stolen.done and stolen.error is None
    assert SEEN_STEPS == [3] * 8, SEEN_STEPS
    assert decode_value(stolen.value.data) == 24
    new = worker.shared[clock._shared_id or ""]
    assert new is not clock and isinstance(new, Clock)
    assert new._shared_inc == 1 and new.step == 0 and clock.step == 3


def test_a_job_parked_on_the_old_incarnation_waits_for_the_new_one(worker: Worker) -> None:
    # Parked for step 1 on the old object, the job would wait for ever on an object no call
    # changes any more: it is given the new one, and runs when that one reaches step 1.
    run = RunState("r1", "test", 0.5, 0)
    clock = _clock_at(worker, 0, run)
    stolen = Job(at_step.fn, Encoded(encode_value((clock, 1))), None, 0, run, 0.5)
    stolen.set_path(b"\x01")
    stolen.origin = "victim"
    worker.post(JobArrived(stolen))
    worker.drain()
    worker.run_job(worker.queue.pop() or stolen)
    assert worker.parked == [stolen]
    worker.post(_new_incarnation(clock, 0))
    worker.drain()
    new = worker.shared[clock._shared_id or ""]
    assert new is not clock and stolen.args[0] is new and worker.parked == [stolen]
    advance = SharedUpdate(clock._shared_id or "", "new", 1, "advance", b"\x81\x01", 1)
    worker.post(UpdatesArrived([advance]))
    worker.drain()
    assert worker.parked == [] and worker.queue.pop() is stolen
    worker.run_job(stolen)
    assert stolen.error is None and decode_value(stolen.value.data) == 1
    assert clock.step == 0  # the old object: changed by nothing since


def test_without_satind_a_shared_object_is_a_plain_object() -> None:
    assert worker_mod.CURRENT is None
    counter = Counter()
    assert use(counter, 4) == 4 and counter._shared_id is None
    h = use.spawn(counter, 1)
    sync()
    assert h.result() == 5
