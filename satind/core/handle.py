"""The protocol core's one entry: ``handle(state, event, now) -> effects``.

Every stimulus a peer's core decides on is one call here, with plain data (Dask's worker state
machine and h11 in shape): a member's message (``Received``), a membership change SWIM
reported (``MemberChanged``), runs and orphan tuples gossip brought (``RunsHeard``,
``TuplesHeard``), an orphan table that came with a steal reply (``OrphanTable``), what the
compute side reported (``work/reports.py``), a timer that fired (``core/model/timers.py``) and
shipped code that arrived, or could not (``CodeArrived``, core/shipping.py), and what a
lost member's checkpoint log held (``LogRead``, core/logged.py).
A test feeds the same call and compares the effects by equality. The procedures that wait for
other members (a run's finish, a submission's parse: node/control.py) call the rules of
``core/master.py`` at their steps instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from satind.core import (
    election,
    lifecycle,
    logged,
    messages,
    orphans,
    reports,
    restart,
    shipping,
    timers,
)
from satind.core.effects import Effects, Link
from satind.core.model.timers import TIMER_EVENTS, TimerEvent
from satind.membership.view import Change
from satind.net import messages as m
from satind.work.reports import Report

if TYPE_CHECKING:
    from satind.core.state import PeerState


@dataclass(frozen=True, slots=True)
class Received:
    """A member's message, on ``link``."""

    link: Link
    msg: m.Message


@dataclass(frozen=True, slots=True)
class MemberChanged:
    """SWIM changed a member's state (joined, suspected, dead, left, a newer instance)."""

    change: Change


@dataclass(frozen=True, slots=True)
class RunsHeard:
    """Gossip brought news of runs."""

    runs: Sequence[m.RunAnnounce]


@dataclass(frozen=True, slots=True)
class TuplesHeard:
    """Gossip brought orphan tuples."""

    tuples: Sequence[m.OrphanTuple]


@dataclass(frozen=True, slots=True)
class OrphanTable:
    """A victim's orphan table, with the reply to this peer's first steals."""

    tuples: list[m.OrphanTuple]


Event = (
    Received
    | MemberChanged
    | RunsHeard
    | TuplesHeard
    | OrphanTable
    | TimerEvent
    | Report
    | shipping.CodeArrived
    | logged.LogRead
)


def handle(state: PeerState, event: Event, now: float) -> Effects:
    """The effects of one stimulus (see the module) at ``now``."""
    if isinstance(event, Received):
        if (sample := event.link.measured) is not None:  # a large frame: the link's bandwidth
            state.table.measured_bandwidth(event.link.remote_name, *sample)
        return messages.on_message(state, event.link, event.msg, now)
    if isinstance(event, MemberChanged):
        return restart.on_member_change(state, event.change, now)
    if isinstance(event, RunsHeard):
        # A run learnt whose master is gone may be this peer's to take over (election.py).
        return lifecycle.on_announces(state, list(event.runs), now) + election.elect_late(
            state, now
        )
    if isinstance(event, TuplesHeard):
        return orphans.on_tuples(state, event.tuples)
    if isinstance(event, OrphanTable):
        return orphans.got_table(state, event.tuples)
    if isinstance(event, TIMER_EVENTS):
        return timers.fire(state, event, now)
    if isinstance(event, shipping.CodeArrived):
        return shipping.on_code(state, event, now)
    if isinstance(event, logged.LogRead):
        return logged.on_read(state, event)
    return reports.on_report(state, event, now)
