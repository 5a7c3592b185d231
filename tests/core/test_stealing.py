"""The victim's and the thief's side of a steal, and custody: event in, effects out."""

from __future__ import annotations

import pytest

from satind.core import custody, orphans, sharing, thief, victim
from satind.core.effects import (
    Checkpoint,
    EncodeArgs,
    HandOut,
    Log,
    Reply,
    Send,
    ToCompute,
)
from satind.core.model.orphans import Orphans
from satind.core.state import PeerState
from satind.engine.frames import ChildResult, JobArrived, Wakeup
from satind.net import codec
from satind.net import messages as m
from satind.net.codec import Encoded
from satind.work.jobs import Job
from tests.core.support import FakeLink, info, job_of, known_run, make_state


def _request(req: int = 1, run: str = "", orphans: bool = False, many: int = 1) -> m.StealRequest:
    return m.StealRequest(req, False, orphans, run, many=many)


def test_a_steal_from_an_empty_queue_gets_no_job() -> None:
    state = make_state()
    link = FakeLink("b/0")
    assert victim.on_steal_request(state, link, _request(), 0.0) == [
        Reply(link, m.StealReply(1, None, None))
    ]


def test_a_steal_takes_the_oldest_job_into_custody() -> None:
    state = make_state()
    run = known_run(state)
    old, new = job_of(run.state, (20,), index=0), job_of(run.state, (10,), index=1)
    state.queue.push(old)
    state.queue.push(new)
    link = FakeLink("b/0")
    fx = victim.on_steal_request(state, link, _request(), 5.0)
    assert len(fx) == 2 and isinstance(fx[0], HandOut) and fx[1] == Checkpoint("theft")
    spec = fx[0].reply.job
    assert spec is not None and fx[0].job is old
    assert (spec.run_id, spec.path, spec.fn, spec.epoch) == (
        "r1",
        old.path,
        "satind_plugins.fib:fib",
        0,
    )
    assert codec.decode_value(spec.args) == (20,)
    assert [g.thief for g in state.custody.given[("r1", old.path)]] == ["b/0"]
    assert state.steal.jobs_given == 1 and list(state.queue.jobs) == [new]


def test_a_runs_steals_are_its_own_not_every_runs_on_the_peer() -> None:
    # Two runs going on one peer: the status's per-run steals/s comes from each run's own
    # counts, not from the peer's counters' growth, which is both runs' (issue 32, point 3).
    state = make_state()
    r1, r2 = known_run(state, info("r1")), known_run(state, info("r2"))
    for i in range(3):
        state.queue.push(job_of(r1.state, (20,), index=i))
    handed: list[HandOut] = []
    for req in range(3):
        fx = victim.on_steal_request(state, FakeLink("b/0"), _request(req), 0.0)
        assert isinstance(fx[0], HandOut)
        handed.append(fx[0])
    assert victim.not_handed_out(state, handed[0].reply, handed[0].job)  # one could not go
    state.count_steal("r2", "stolen_local")
    state.count_steal("r2", "stolen_wide")
    state.count_steal("r2", "stolen_wide")
    assert state.steal.jobs_given == 2  # the peer's, as before
    assert (state.steal.stolen_local, state.steal.stolen_wide) == (1, 2)
    one, two = state.run_counters("r1"), state.run_counters("r2")
    assert (one["jobs_given"], one["stolen_local"], one["stolen_wide"]) == (2, 0, 0)
    assert (two["jobs_given"], two["stolen_local"], two["stolen_wide"]) == (0, 1, 2)
    assert r2.steals == {"stolen_local": 1, "stolen_wide": 2}


def test_a_thief_that_waits_in_a_sync_gets_only_its_runs_job() -> None:
    state = make_state()
    r1, r2 = known_run(state, info("r1")), known_run(state, info("r2"))
    other, mine = job_of(r2.state, index=0), job_of(r1.state, index=1)
    state.queue.push(other)
    state.queue.push(mine)
    fx = victim.on_steal_request(state, FakeLink("b/0"), _request(run="r1"), 0.0)
    assert isinstance(fx[0], HandOut) and fx[0].job is mine
    assert list(state.queue.jobs) == [other]


def test_a_job_whose_result_an_orphan_holder_keeps_is_fetched_not_given() -> None:
    state = make_state()
    run = known_run(state)
    parent = job_of(run.state, index=0)
    child = job_of(run.state, parent=parent, index=3)
    state.queue.push(child)
    Orphans.file(run.state, m.OrphanTuple("r1", child.path, "c/0"))
    link = FakeLink("b/0")
    fx = victim.on_steal_request(state, link, _request(), 2.0)
    assert fx == [
        Send("c/0", m.JobQuery("r1", child.path)),
        Reply(link, m.StealReply(1, None, None)),
    ]
    assert state.custody.given[("r1", child.path)][0].adopted


def test_jobs_of_a_run_that_is_over_are_not_given_away() -> None:
    state = make_state()
    run = known_run(state)
    state.queue.push(job_of(run.state))
    run.state.aborted = True
    link = FakeLink("b/0")
    assert victim.on_steal_request(state, link, _request(), 0.0) == [
        Reply(link, m.StealReply(1, None, None))
    ]


def test_a_joiner_gets_the_orphan_table_with_its_steal() -> None:
    state = make_state()
    run = known_run(state)
    Orphans.file(run.state, m.OrphanTuple("r1", b"\x01", "c/0"))
    fx = victim.on_steal_request(state, FakeLink("b/0"), _request(orphans=True), 0.0)
    assert isinstance(fx[0], Reply) and isinstance(fx[0].msg, m.StealReply)
    assert fx[0].msg.orphans == [m.OrphanTuple("r1", b"\x01", "c/0")]


def test_a_joiner_gets_the_whole_table_of_a_victim_with_more_than_one_messages_worth() -> None:
    state = make_state()
    run = known_run(state)
    paths = [i.to_bytes(2, "big") for i in range(4_500)]
    for path in paths:
        Orphans.file(run.state, m.OrphanTuple("r1", path, "c/0"))
    fx = victim.on_steal_request(state, FakeLink("b/0"), _request(orphans=True), 0.0)
    replies = [f.msg for f in fx if isinstance(f, Reply)]
    first = replies[0]
    assert isinstance(first, m.StealReply) and first.orphans is not None
    assert len(first.orphans) == state.cfg.ft.tuples_per_message == 2_000
    rest = [t for msg in replies[1:] if isinstance(msg, m.Gossip) for t in msg.gossip.tuples]
    assert sorted(t.path for t in [*first.orphans, *rest]) == paths


def test_an_empty_table_does_not_end_a_joiners_asking() -> None:
    state = make_state()
    known_run(state)
    assert state.needs_orphans
    orphans.got_table(state, [])
    assert state.needs_orphans
    orphans.got_table(state, [m.OrphanTuple("r1", b"\x01", "c/0")])
    assert not state.needs_orphans


def test_large_arguments_are_encoded_off_the_network_side() -> None:
    state = make_state()
    run = known_run(state)
    big = job_of(run.state, (tuple(range(10_000)),))
    state.queue.push(big)
    link = FakeLink("b/0")
    request = _request()
    assert victim.on_steal_request(state, link, request, 0.0) == [EncodeArgs(link, request, big)]


def test_a_job_stolen_on_travels_with_its_arguments_as_they_came() -> None:
    state = make_state()
    run = known_run(state)
    job = job_of(run.state, Encoded(b"\xd9\x98\x59\x81\x05"))
    state.queue.push(job)
    fx = victim.on_steal_request(state, FakeLink("b/0"), _request(), 0.0)
    assert isinstance(fx[0], HandOut) and fx[0].reply.job is not None
    assert fx[0].reply.job.args == b"\xd9\x98\x59\x81\x05"


def test_a_draining_victim_still_gives_work_away() -> None:
    state = make_state()
    state.draining = True
    run = known_run(state)
    state.queue.push(job_of(run.state))
    fx = victim.on_steal_request(state, FakeLink("b/0"), _request(), 0.0)
    assert isinstance(fx[0], HandOut)


def test_a_reply_that_cannot_go_leaves_the_job_here() -> None:
    state = make_state()
    run = known_run(state)
    job = job_of(run.state)
    state.queue.push(job)
    fx = victim.on_steal_request(state, FakeLink("b/0"), _request(), 0.0)
    assert isinstance(fx[0], HandOut)
    assert victim.not_handed_out(state, fx[0].reply, fx[0].job) == [ToCompute(Wakeup())]
    assert list(state.queue.jobs) == [job] and not state.custody.given


def _bag(state: PeerState, n: int) -> tuple[Job, list[Job]]:
    """A frame that spawned ``n`` children, all queued (oldest first), and a later job of
    another frame on top."""
    run = known_run(state)
    frame = job_of(run.state, (0,), index=0)
    kids = [job_of(run.state, (i,), parent=frame, index=i) for i in range(n)]
    for kid in kids:
        state.queue.push(kid)
    return frame, kids


def test_an_idle_thief_takes_half_of_a_bag_in_one_steal() -> None:
    # Steal-half (steal.batch_max): 20 siblings at the oldest end, a thief that asks for up
    # to 32 takes the older 11 (the victim keeps 9 queued and the one it runs), each in
    # custody, in one reply; the rest stay queued in their order.
    state = make_state()
    _, kids = _bag(state, 20)
    request = _request(many=32)
    fx = victim.on_steal_request(state, FakeLink("b/0"), request, 1.0)
    hand = fx[0]
    assert isinstance(hand, HandOut) and hand.reply.job is not None
    given = [hand.job, *hand.more]
    assert given == kids[:11]
    assert [s.path for s in [hand.reply.job, *hand.reply.more]] == [k.path for k in kids[:11]]
    assert [codec.decode_value(s.args) for s in hand.reply.more] == [(i,) for i in range(1, 11)]
    assert len(state.custody.given) == 11 and state.steal.jobs_given == 11
    assert list(state.queue.jobs) == kids[11:]
    # A reply that cannot go puts all of them back, in their order, out of custody.
    victim.not_handed_out(state, hand.reply, hand.job, hand.more)
    assert list(state.queue.jobs) == kids and not state.custody.given
    assert state.steal.jobs_given == 0


@pytest.mark.parametrize(("n", "many"), [(7, 32), (20, 1)])
def test_few_siblings_or_a_thief_in_a_sync_take_one_job(n: int, many: int) -> None:
    # Fewer siblings than steal.batch_from (a divide-and-conquer frame's children), or a
    # thief that asks for one (it waits in a sync): the oldest job alone, as before.
    state = make_state()
    _, kids = _bag(state, n)
    fx = victim.on_steal_request(state, FakeLink("b/0"), _request(many=many), 1.0)
    hand = fx[0]
    assert isinstance(hand, HandOut) and hand.job is kids[0] and hand.more == []
    assert hand.reply.more == [] and list(state.queue.jobs) == kids[1:]


def test_siblings_of_a_first_job_aborted_meanwhile_go_back_unless_aborted_too() -> None:
    # The frame aborted its first 3 children while the batch was chosen (aborted_below 3):
    # nothing goes to the thief, the siblings that still count go back to the queue (the
    # compute side is woken), the aborted ones do not.
    state = make_state()
    frame, kids = _bag(state, 20)
    state.queue.jobs.popleft()  # the first, as the steal took it
    more: list[tuple[Job, bytes, list[str]]] = [
        (kid, codec.encode_value((kid.index,)), []) for kid in kids[1:6]
    ]
    for kid in kids[1:6]:
        state.queue.jobs.remove(kid)
    frame.aborted_below = 3
    fx = victim.hand_out(state, FakeLink("b/0"), _request(many=32), kids[0], b"", 1.0, [], more)
    assert fx[0] == ToCompute(Wakeup())
    replies = [f.msg for f in fx if isinstance(f, Reply)]
    assert len(replies) == 1 and isinstance(replies[0], m.StealReply)
    assert replies[0].job is None
    assert list(state.queue.jobs) == [*kids[3:6], *kids[6:]]
    assert not state.custody.given


def test_a_batch_stops_at_the_first_job_of_another_frame() -> None:
    state = make_state()
    _, kids = _bag(state, 10)
    other = job_of(kids[0].run, (99,), index=3)  # another frame's, between the siblings
    state.queue.jobs.insert(4, other)
    fx = victim.on_steal_request(state, FakeLink("b/0"), _request(many=32), 1.0)
    hand = fx[0]
    assert isinstance(hand, HandOut)
    # Only 4 siblings lie before it: fewer than batch_from, so one job goes.
    assert hand.job is kids[0] and hand.more == []
    assert list(state.queue.jobs) == [*kids[1:4], other, *kids[4:]]


# -- custody ----------------------------------------------------------------------------------


def test_a_result_completes_its_child_once() -> None:
    state = make_state()
    run = known_run(state)
    parent = job_of(run.state)
    child = job_of(run.state, parent=parent, index=1)
    state.custody.give(("r1", child.path), child, "b/0", 0.0)
    result = m.JobResult("r1", child.path, codec.encode_value(8), None)
    fx = custody.on_job_result(state, "b/0", result, 1.0)
    assert len(fx) == 1 and isinstance(fx[0], ToCompute)
    event = fx[0].event
    assert isinstance(event, ChildResult) and event.job is child
    assert isinstance(event.value, Encoded) and event.value.decode() == 8  # decoded by compute
    assert custody.on_job_result(state, "b/0", result, 1.0) == []  # a duplicate: ignored


def test_a_result_for_a_job_without_local_parent_travels_on() -> None:
    state = make_state()
    run = known_run(state)
    job = job_of(run.state)
    job.origin = "c/0"  # we stole it from c/0; b/0 stole it from us
    state.custody.take(("r1", job.path), "c/0", job)
    state.custody.give(("r1", job.path), job, "b/0", 0.0)
    value = codec.encode_value(13)
    fx = custody.on_job_result(state, "b/0", m.JobResult("r1", job.path, value, None), 1.0)
    sent = m.JobResult("r1", job.path, value, None)
    assert fx == [Log("result", sent), Send("c/0", sent)]


def test_a_result_from_a_thief_declared_dead_is_ignored() -> None:
    from satind.core import restart
    from satind.membership.view import State
    from tests.core.support import declare

    state = make_state()
    run = known_run(state)
    parent = job_of(run.state)
    child = job_of(run.state, parent=parent, index=1)
    state.custody.give(("r1", child.path), child, "b/0", 0.0)
    declare(state, "b/0", State.DEAD)
    assert ToCompute(JobArrived(child, restarted=True)) in restart.restart_jobs_of(
        state, "b/0", "dead"
    )
    late = m.JobResult("r1", child.path, codec.encode_value(8), None)
    assert custody.on_job_result(state, "b/0", late, 1.0) == []


def test_custody_queries_are_answered_from_the_thiefs_records() -> None:
    state = make_state()
    run = known_run(state)
    job = job_of(run.state)
    link = FakeLink("b/0")
    query = m.JobQuery("r1", job.path)
    assert custody.on_job_query(state, link, query) == [
        Reply(link, m.JobState("r1", job.path, "unknown"))
    ]
    state.custody.take(("r1", job.path), "b/0", job)
    assert custody.on_job_query(state, link, query) == [
        Reply(link, m.JobState("r1", job.path, "running"))
    ]
    result = m.JobResult("r1", job.path, codec.encode_value(1), None)
    state.custody.finished(("r1", job.path), "b/0", result)
    assert custody.on_job_query(state, link, query) == [Reply(link, result)]  # sent again


def test_a_thief_that_knows_the_run_ended_says_so() -> None:
    from satind.core.lifecycle import drop

    state = make_state()
    known_run(state, info(master="c/0"))
    end = m.RunAnnounce(info(master="c/0"), "done")
    state.runs.remember_ended(end)
    drop(state, "r1")
    link = FakeLink("b/0")
    assert custody.on_job_query(state, link, m.JobQuery("r1", b"\x02")) == [
        Reply(link, m.JobState("r1", b"\x02", "over", end))
    ]


def test_unknown_to_the_thief_the_job_comes_back() -> None:
    state = make_state()
    run = known_run(state)
    job = job_of(run.state)
    state.custody.give(("r1", job.path), job, "b/0", 0.0)
    fx = custody.on_job_state(state, "b/0", m.JobState("r1", job.path, "unknown"), 1.0)
    assert fx == [ToCompute(JobArrived(job))] and not state.custody.given


def test_over_at_the_thief_ends_the_run_here_instead_of_taking_the_job_back() -> None:
    state = make_state()
    run = known_run(state, info(master="c/0"))
    job = job_of(run.state)
    state.custody.give(("r1", job.path), job, "b/0", 0.0)
    end = m.RunAnnounce(info(master="c/0"), "done")
    fx = custody.on_job_state(state, "b/0", m.JobState("r1", job.path, "over", end), 1.0)
    assert ToCompute(JobArrived(job)) not in fx
    assert "r1" not in state.runs.active and run.state.aborted


def test_overdue_jobs_are_asked_about_and_a_gone_thief_loses_them() -> None:
    from satind.membership.view import State
    from tests.core.support import declare

    state = make_state()
    run = known_run(state)
    a, b = job_of(run.state, index=0), job_of(run.state, index=1)
    state.custody.give(("r1", a.path), a, "b/0", 0.0)
    state.custody.give(("r1", b.path), b, "c/0", 0.0)
    declare(state, "c/0", State.DEAD)
    fx = custody.custody_tick(state, state.cfg.steal.custody_check_s + 1)
    assert Send("b/0", m.JobQuery("r1", a.path)) in fx
    assert ToCompute(JobArrived(b, restarted=True)) in fx


# -- the thief's side ----------------------------------------------------------------------------


def test_a_stolen_job_is_taken_with_its_arguments_still_encoded() -> None:
    state = make_state()
    spec = m.JobSpec(
        "r1",
        "fib",
        info().code_hash,
        "c/0",
        2,
        b"\x00\x01",
        "satind_plugins.fib:fib",
        codec.encode_value((9,)),
        0,
    )
    job, fx = thief.accept_stolen(state, spec, "c/0")
    assert job is not None and fx == []
    assert isinstance(job.args, Encoded) and job.origin == "c/0" and job.path == b"\x00\x01"
    assert (("r1", b"\x00\x01"), "c/0") in state.custody.taken


def test_a_stolen_job_this_peer_cannot_run_is_refused_to_its_victim() -> None:
    state = make_state()
    spec = m.JobSpec(
        "r1", "fib", info().code_hash, "c/0", 2, b"\x00", "nowhere:nothing", b"\x80", 0
    )
    job, fx = thief.accept_stolen(state, spec, "c/0")
    assert job is None and len(fx) == 1 and isinstance(fx[0], Send)
    assert isinstance(fx[0].msg, m.JobResult) and fx[0].msg.error is not None
    assert "no spawnable function" in fx[0].msg.error.message


def test_a_finished_stolen_job_sends_its_calls_before_its_result_and_lists_them() -> None:
    # Results wait for their calls (core/sharing.py): the calls queued here go first, on the
    # same connection, and the result says what this peer had applied (Job.needs, from the
    # compute side); the victim's ChildResult carries it, and who sent it.
    state = make_state()
    run = known_run(state)
    job = job_of(run.state)
    job.origin = "c/0"
    state.custody.take(("r1", job.path), "c/0", job)
    update = m.SharedUpdate("r1::0", "a/0", 1, "improve", codec.encode_value((3,)), 0)
    assert sharing.call_made(state, update) != []  # queued: a flush is due after combine_s
    needs = [m.ReplicaDigest("r1::0", 0, {"a/0": 1, "b/0": 4})]
    job.needs = needs
    job.value = Encoded(codec.encode_value(7))
    fx = thief.job_finished(state, job)
    sends = [e for e in fx if isinstance(e, Send)]
    calls = m.SharedUpdates([update])
    result = m.JobResult("r1", job.path, codec.encode_value(7), None, needs)
    assert sends == [Send("b/0", calls), Send("c/0", calls), Send("c/0", result)]
    assert not state.sharing.outbox

    victim_state = make_state("c/0", ("a/0", "b/0"))
    victim_run = known_run(victim_state)
    parent = job_of(victim_run.state)
    child = job_of(victim_run.state, parent=parent, index=1)
    victim_state.custody.give(("r1", child.path), child, "a/0", 0.0)
    result = m.JobResult("r1", child.path, codec.encode_value(7), None, needs)
    [effect] = custody.on_job_result(victim_state, "a/0", result, 1.0)
    assert isinstance(effect, ToCompute) and isinstance(effect.event, ChildResult)
    assert (effect.event.needs, effect.event.sender) == (needs, "a/0")
