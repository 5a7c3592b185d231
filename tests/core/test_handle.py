"""core/handle.py: the core's one entry routes each kind of stimulus to its rule."""

from __future__ import annotations

from typing import get_args

import pytest

from satind.core import messages, reports, timers
from satind.core.effects import Effect, Log, Reply, Send
from satind.core.events import MemberChanged, Received, RunsHeard
from satind.core.handle import RULES, Event, handle
from satind.core.model.timers import FlushShared, TimerEvent
from satind.membership.view import State
from satind.net import messages as m
from satind.node.effects import CARRY, apply_effects
from satind.routing import NoRoute
from satind.work.reports import JobLogged, Report
from tests.core.support import FakeLink, info, job_of, known_run, make_state, member


def test_a_members_message_goes_to_its_rule() -> None:
    state = make_state()
    link = FakeLink("b/0")
    fx = handle(state, Received(link, m.JobQuery("r1", b"\x01")), 1.0)
    assert fx == [Reply(link, m.JobState("r1", b"\x01", "unknown"))]


def test_every_message_the_core_takes_is_a_message_of_the_protocol() -> None:
    assert messages.RULES.types()
    assert all(issubclass(kind, m.Message) for kind in messages.RULES.types())
    assert not set(messages.RULES.types()) & set(m.ANSWER_TYPES)  # answers resolve requests (node)


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


def test_every_kind_of_stimulus_report_timer_and_effect_has_its_route() -> None:
    """The routing tables name every type of their unions: a new one without its handler
    fails here, not when it first happens (satind/routing.py)."""
    assert set(get_args(Report)) == reports.RULES.types()
    assert set(get_args(TimerEvent)) == timers.RULES.types()
    events = {t for t in get_args(Event) if t not in (Report, TimerEvent)}
    events |= set(get_args(Report)) | set(get_args(TimerEvent))
    assert events == RULES.types()
    assert set(get_args(Effect)) == CARRY.types()


def test_a_stimulus_of_no_known_type_raises_instead_of_vanishing() -> None:
    with pytest.raises(NoRoute, match="no handler for the event object"):
        handle(make_state(), object(), 1.0)  # type: ignore[arg-type]
    with pytest.raises(NoRoute, match="no handler for the effect object"):
        apply_effects(None, [object()])  # type: ignore[arg-type, list-item]
