"""Shipped code in the core (core/shipping.py, core/lifecycle.py): a member fetches a run's
code once, holds jobs stolen before it came and tells their victims they run, takes them
when it comes, and gives them back when it cannot be had; a member whose operator does not
accept shipped code takes no part."""

from __future__ import annotations

import dataclasses

from satind_plugins.fib import PLUGIN as FIB

from satind.core.effects import FetchCode, Reply, Send, StealUpdate
from satind.core.events import Received
from satind.core.handle import handle
from satind.core.lifecycle import register
from satind.core.shipping import CodeArrived
from satind.core.state import PeerState
from satind.core.thief import accept_stolen
from satind.net import codec
from satind.net import messages as m
from tests.core.support import FakeLink, make_state

HASH = "ab" * 32
SHIPPED = dataclasses.replace(FIB, code_hash=HASH)


def shipped_info() -> m.RunInfo:
    return m.RunInfo(
        "r1", "fib", HASH, ["12"], codec.encode_value((12, 20)), "b/0", 2, shipped=True
    )


def spec(path: bytes = b"\x00") -> m.JobSpec:
    return m.JobSpec(
        "r1",
        "fib",
        HASH,
        "b/0",
        2,
        path,
        "satind_plugins.fib:fib",
        codec.encode_value((9,)),
        shipped=True,
    )


def accepting() -> PeerState:
    state = make_state()
    state.cfg = dataclasses.replace(
        state.cfg, plugins=dataclasses.replace(state.cfg.plugins, accept_shipped=True)
    )
    return state


def test_a_run_whose_code_is_missing_is_fetched_once_from_its_master_first() -> None:
    state = accepting()
    run, fx = register(state, shipped_info())
    assert run is not None and run.plugin is None and run.refused is None
    assert fx == [FetchCode(HASH, ("b/0", "c/0"))]
    assert state.cannot_run() == ["r1"]
    job, fx = accept_stolen(state, spec(), "c/0")
    assert job is None and fx == []  # held, not refused, not fetched again
    # Its victim asks after it: it runs here (it waits for its code).
    asked = handle(state, Received(FakeLink("c/0"), m.JobQuery("r1", b"\x00")), 0.0)
    assert [f.msg for f in asked if isinstance(f, Reply)] == [m.JobState("r1", b"\x00", "running")]
    # The code comes: the run gets its plugin, the held job is taken.
    fx = handle(state, CodeArrived(HASH, {"fib": SHIPPED}), 1.0)
    assert run.plugin is SHIPPED and state.cannot_run() == []
    assert StealUpdate() in fx and not state.held
    assert (("r1", b"\x00"), "c/0") in state.custody.taken


def test_a_lost_master_is_not_asked_for_the_code() -> None:
    # A run's master died, and this peer (perhaps its restarted instance, at the same
    # address) learns of the run: asking the lost master would cost the ask's whole timeout
    # (30 s seen on daemons) before the next member. Only alive members are asked.
    state = accepting()
    info = dataclasses.replace(shipped_info(), master="x/9")  # not an alive member (any more)
    _, fx = register(state, info)
    assert fx == [FetchCode(HASH, ("b/0", "c/0"))]


def test_code_that_cannot_be_had_gives_the_held_jobs_back_and_the_run_goes_on() -> None:
    state = accepting()
    run, _ = register(state, shipped_info())
    accept_stolen(state, spec(), "c/0")
    fx = handle(state, CodeArrived(HASH, error="no member has it"), 1.0)
    assert run is not None and run.refused is not None and "no member has it" in run.refused
    # Back to its victim as a job this peer never had: the victim runs it (no failure).
    sent = [f.msg for f in fx if isinstance(f, Send)]
    assert sent == [m.JobState("r1", b"\x00", "unknown")]


def test_a_member_that_does_not_accept_shipped_code_takes_no_part() -> None:
    state = make_state()  # the shipped default: accept_shipped off
    run, fx = register(state, shipped_info())
    assert run is not None and fx == [] and run.refused is not None
    assert "does not accept shipped code" in run.refused and state.cannot_run() == ["r1"]
    job, fx = accept_stolen(state, spec(), "c/0")
    assert job is None and [f.msg for f in fx if isinstance(f, Send)] == [
        m.JobState("r1", b"\x00", "unknown")
    ]
