"""core/sharing.py as case tables: an event in, the effects out, compared by equality — timers
included: a timer is data (``Timer(delay, event)``), fired by ``core/timers.fire``."""

from __future__ import annotations

from satind.core import sharing, timers
from satind.core.effects import Effect, Send, Timer, ToCompute
from satind.core.model.timers import AskCalls, DigestRound, FetchReplicas, FlushShared
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
from satind.membership.view import State
from satind.net import messages as m
from satind.work.jobs import Job
from tests.core.support import declare, job_of, known_run, make_state


def _update(seq: int = 1, args: bytes = b"\x80") -> m.SharedUpdate:
    return m.SharedUpdate("r1:00:0", "a/0", seq, "add", args)


def _timers(fx: list[Effect]) -> list[Timer]:
    return [f for f in fx if isinstance(f, Timer)]


def _stolen(state: PeerState) -> Job:
    run = known_run(state)
    job = job_of(run.state)
    job.origin = "b/0"
    return job


def test_a_first_global_call_waits_for_the_combining_interval_then_goes_to_every_member() -> None:
    state = make_state()
    cfg = state.cfg.shared
    assert sharing.call_made(state, _update()) == [
        Timer(cfg.combine_s, FlushShared()),
        Timer(cfg.digest_s, DigestRound()),
    ]
    assert sharing.call_made(state, _update(2)) == []  # combined with the first
    sent = timers.fire(state, FlushShared(), cfg.combine_s)
    msg = m.SharedUpdates([_update(), _update(2)])
    assert sent == [Send("b/0", msg), Send("c/0", msg)]
    assert state.sharing.counters.shared_updates_sent == 4  # 2 calls x 2 members
    assert timers.fire(state, FlushShared(), 2 * cfg.combine_s) == []  # nothing queued


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
    state.sharing.replica_ids = {"r1:00:0"}
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
    wait = cfg.guard_wait_s
    assert sharing.guard_waiting(state, job) == [Timer(wait, FetchReplicas(job, wait))]
    again = min(2 * wait, max(cfg.fetch_retry_s, wait))
    assert timers.fire(state, FetchReplicas(job, wait), wait) == [
        Send("b/0", m.ReplicaRequest("r1:01:0")),
        Timer(again, FetchReplicas(job, again)),
    ]
    assert sharing.guard_waiting(state, job, waiting=False) == []
    # It ran meanwhile: no more fetches.
    assert timers.fire(state, FetchReplicas(job, again), wait + again) == []


def test_a_held_result_is_applied_as_it_is_once_its_sender_is_gone() -> None:
    state = make_state()
    job = _stolen(state)
    cfg = state.cfg.shared
    wait = cfg.guard_wait_s
    assert sharing.result_waiting(state, job, "b/0") == [Timer(wait, AskCalls(job, "b/0", wait))]
    again = min(2 * wait, max(cfg.fetch_retry_s, wait))
    assert timers.fire(state, AskCalls(job, "b/0", wait), wait) == [
        ToCompute(DigestWanted("b/0")),
        Timer(again, AskCalls(job, "b/0", again)),
    ]
    declare(state, "b/0", State.DEAD)
    assert timers.fire(state, AskCalls(job, "b/0", again), wait + again) == [
        ToCompute(ResultDue(job))
    ]
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
    state.sharing.replica_ids = {"r1:00:0"}
    every = state.cfg.shared.digest_s
    assert _timers(sharing.call_made(state, _update()))[1] == Timer(every, DigestRound())
    target, again = timers.fire(state, DigestRound(), every)
    assert target in (ToCompute(DigestWanted("b/0")), ToCompute(DigestWanted("c/0")))
    assert again == Timer(every, DigestRound())
    state.sharing.replica_ids = set()
    assert timers.fire(state, DigestRound(), 2 * every) == []
    assert not state.sharing.digesting


def test_a_run_that_ends_forgets_its_records_and_tells_the_compute_side() -> None:
    state = make_state()
    job = _stolen(state)
    sharing.arrive(state, job, ["r1:01:0"], "b/0", 0.0)
    sharing.guard_waiting(state, job)
    assert sharing.forget_run(state, "r1") == [ToCompute(ForgetRun("r1"))]
    assert not state.sharing.held and not state.sharing.parked and not state.sharing.refs
