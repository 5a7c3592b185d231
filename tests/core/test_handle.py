"""core/handle.py: the core's one entry routes each kind of stimulus to its rule."""

from __future__ import annotations

from satind.core import messages
from satind.core.effects import Log, Reply, Send
from satind.core.handle import MemberChanged, Received, RunsHeard, handle
from satind.core.model.timers import FlushShared
from satind.membership.view import State
from satind.net import messages as m
from satind.work.reports import JobLogged
from tests.core.support import FakeLink, info, job_of, known_run, make_state, member


def test_a_members_message_goes_to_its_rule() -> None:
    state = make_state()
    link = FakeLink("b/0")
    fx = handle(state, Received(link, m.JobQuery("r1", b"\x01")), 1.0)
    assert fx == [Reply(link, m.JobState("r1", b"\x01", "unknown"))]


def test_every_message_the_core_takes_is_a_message_of_the_protocol() -> None:
    assert messages.RULES
    assert all(issubclass(kind, m.Message) for kind in messages.RULES)
    assert not set(messages.RULES) & set(m.ANSWER_TYPES)  # answers resolve requests (node)


def test_a_fired_timer_goes_to_the_rule_that_set_it() -> None:
    state = make_state()
    update = m.SharedUpdate("r1:00:0", "a/0", 1, "add", b"\x80")
    state.sharing.outbox.append(update)
    msg = m.SharedUpdates([update])
    assert handle(state, FlushShared(), 1.0) == [Send("b/0", msg), Send("c/0", msg)]


def test_a_report_of_the_compute_side_goes_to_its_rule() -> None:
    state = make_state()
    run = known_run(state)
    job = job_of(run.state)
    assert handle(state, JobLogged(job, b"\x05"), 1.0) == [
        Log("result", m.JobResult("r1", job.path, b"\x05", None))
    ]


def test_gossip_and_membership_news_go_to_their_rules() -> None:
    state = make_state()
    announce = m.RunAnnounce(info(master="b/0"), "running")
    handle(state, RunsHeard([announce]), 1.0)
    assert "r1" in state.runs.active
    dead = member("b/0").update(State.DEAD, origin="a/0")
    (change,), _ = state.table.apply(dead)
    handle(state, MemberChanged(change), 2.0)
    assert state.runs.active["r1"].info.master == "a/0"  # the master's run taken over
