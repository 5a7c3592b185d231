"""core/sharing.py as case tables: an event in, the effects out, compared by equality (timers
are run by calling them with the time they fire at)."""

from __future__ import annotations

from satind.core import sharing
from satind.core.effects import Effect, Later, Send, ToCompute
from satind.core.state import PeerState
from satind.engine.frames import (
    DigestWanted,
    ForgetRun,
    JobArrived,
    ReplicaArrived,
    ReplicaWanted,
    ResultDue,
    UpdatesArrived,
)
from satind.engine.jobs import Job
from satind.membership.view import State
from satind.net import messages as m
from tests.core.support import declare, job_of, known_run, make_state


def _update(seq: int = 1, args: bytes = b"\x80") -> m.SharedUpdate:
    return m.SharedUpdate("r1:00:0", "a/0", seq, "add", args)


def _timers(fx: list[Effect]) -> list[Later]:
    return [f for f in fx if isinstance(f, Later)]


def _stolen(state: PeerState) -> Job:
    run = known_run(state)
    job = job_of(run.state)
    job.origin = "b/0"
    return job


def test_a_first_global_call_waits_for_the_combining_interval_then_goes_to_every_member() -> None:
    state = make_state()
    fx = sharing.call_made(state, _update())
    combine, digest = _timers(fx)
    assert (combine.delay, digest.delay) == (
        state.cfg.shared.combine_s,
        state.cfg.shared.digest_s,
    )
    assert sharing.call_made(state, _update(2)) == []  # combined with the first
    sent = combine.then(combine.delay)
    msg = m.SharedUpdates([_update(), _update(2)])
    assert sent == [Send("b/0", msg), Send("c/0", msg)]
    assert state.sharing.counters.shared_updates_sent == 4  # 2 calls x 2 members
    assert combine.then(2 * combine.delay) == []  # nothing queued any more


def test_calls_past_combine_bytes_go_at_once() -> None:
    state = make_state()
    big = _update(args=bytes(state.cfg.shared.combine_bytes))
    assert sharing.call_made(state, big) == [
        Send("b/0", m.SharedUpdates([big])),
        Send("c/0", m.SharedUpdates([big])),
    ]


def test_updates_in_go_to_the_compute_side() -> None:
    state = make_state()
    fx = sharing.on_updates(state, m.SharedUpdates([_update()]))
    assert fx[0] == ToCompute(UpdatesArrived([_update()]))
    assert state.sharing.counters.shared_updates_received == 1


def test_a_stolen_job_without_shared_objects_goes_to_the_compute_side_at_once() -> None:
    state = make_state()
    job = _stolen(state)
    assert sharing.arrive(state, job, [], "b/0", 0.0) == [ToCompute(JobArrived(job))]


def test_a_stolen_job_waits_for_the_replicas_it_lacks_then_goes() -> None:
    state = make_state()
    state.replicas = {"r1:00:0": object()}
    job = _stolen(state)
    fx = sharing.arrive(state, job, ["r1:00:0", "r1:01:0", "r1:02:0"], "b/0", 0.0)
    assert fx == [
        Send("b/0", m.ReplicaRequest("r1:01:0")),
        Send("b/0", m.ReplicaRequest("r1:02:0")),
    ]
    reply = m.ReplicaReply("r1:01:0", "mod:Cls", b"\xa0", {"b/0": 1})
    arrived = ToCompute(ReplicaArrived("r1:01:0", "mod:Cls", b"\xa0", {"b/0": 1}, 0))
    assert sharing.on_replica_reply(state, reply)[0] == arrived
    assert state.sharing.held[0].missing == {"r1:02:0"}
    last = m.ReplicaReply("r1:02:0", "mod:Cls", b"\xa0", {})
    fx = sharing.on_replica_reply(state, last)
    assert fx[-1] == ToCompute(JobArrived(job))
    assert state.sharing.held == []


def test_a_peer_without_the_replica_any_more_answers_none_and_the_job_keeps_waiting() -> None:
    state = make_state()
    job = _stolen(state)
    sharing.arrive(state, job, ["r1:01:0"], "b/0", 0.0)
    assert sharing.on_replica_reply(state, m.ReplicaReply("r1:01:0", "", None, {})) == []
    assert [h.job for h in state.sharing.held] == [job]


def test_the_tick_asks_again_after_fetch_retry_and_drops_jobs_whose_victim_is_gone() -> None:
    state = make_state()
    job = _stolen(state)
    sharing.arrive(state, job, ["r1:01:0"], "b/0", 0.0)
    retry = state.cfg.shared.fetch_retry_s
    assert sharing.tick(state, retry / 2) == []
    assert sharing.tick(state, retry) == [Send("b/0", m.ReplicaRequest("r1:01:0"))]
    declare(state, "b/0", State.DEAD)
    assert sharing.tick(state, 3 * retry) == []
    assert state.sharing.held == []


def test_a_parked_job_fetches_its_replicas_from_its_victim_doubling_the_wait() -> None:
    state = make_state()
    job = _stolen(state)
    state.sharing.refs[job] = ["r1:01:0"]
    cfg = state.cfg.shared
    (first,) = sharing.guard_waiting(state, job)
    assert isinstance(first, Later) and first.delay == cfg.guard_wait_s
    ask, again = first.then(first.delay)
    assert ask == Send("b/0", m.ReplicaRequest("r1:01:0"))
    assert isinstance(again, Later)
    assert again.delay == min(2 * cfg.guard_wait_s, max(cfg.fetch_retry_s, cfg.guard_wait_s))
    assert sharing.guard_waiting(state, job, waiting=False) == []
    assert again.then(first.delay + again.delay) == []  # it ran meanwhile: no more fetches


def test_a_held_result_is_applied_as_it_is_once_its_sender_is_gone() -> None:
    state = make_state()
    job = _stolen(state)
    (first,) = sharing.result_waiting(state, job, "b/0")
    assert isinstance(first, Later)
    ask, again = first.then(first.delay)
    assert ask == ToCompute(DigestWanted("b/0"))
    assert isinstance(again, Later)
    declare(state, "b/0", State.DEAD)
    assert again.then(first.delay + again.delay) == [ToCompute(ResultDue(job))]
    assert job not in state.sharing.waiting


def test_replica_requests_and_digests_go_to_the_compute_side() -> None:
    state = make_state()
    assert sharing.on_replica_request(state, "b/0", m.ReplicaRequest("r1:01:0")) == [
        ToCompute(ReplicaWanted("r1:01:0", "b/0"))
    ]
    resent = m.SharedUpdates([_update()])
    assert sharing.shared_send(state, "b/0", resent) == [Send("b/0", resent)]
    assert state.sharing.counters.shared_updates_resent == 1


def test_anti_entropy_stops_when_no_replica_is_left_here() -> None:
    state = make_state()
    state.replicas = {"r1:00:0": object()}
    digest = _timers(sharing.call_made(state, _update()))[1]
    target, again = digest.then(digest.delay)
    assert target in (ToCompute(DigestWanted("b/0")), ToCompute(DigestWanted("c/0")))
    assert isinstance(again, Later)
    state.replicas = {}
    assert again.then(2 * digest.delay) == []
    assert not state.sharing.digesting


def test_a_run_that_ends_forgets_its_records_and_tells_the_compute_side() -> None:
    state = make_state()
    job = _stolen(state)
    sharing.arrive(state, job, ["r1:01:0"], "b/0", 0.0)
    sharing.guard_waiting(state, job)
    assert sharing.forget_run(state, "r1") == [ToCompute(ForgetRun("r1"))]
    assert not state.sharing.held and not state.sharing.parked and not state.sharing.refs
