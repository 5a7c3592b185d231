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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
from satind.core.model.timers import TimerEvent
from satind.membership.view import Change
from satind.net import messages as m
from satind.routing import Routes
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


def _received(state: PeerState, event: Received, now: float) -> Effects:
    if (sample := event.link.measured) is not None:  # a large frame: the link's bandwidth
        state.table.measured_bandwidth(event.link.remote_name, *sample)
    return messages.on_message(state, event.link, event.msg, now)


def _runs_heard(state: PeerState, event: RunsHeard, now: float) -> Effects:
    # A run learnt whose master is gone may be this peer's to take over (election.py).
    return lifecycle.on_announces(state, list(event.runs), now) + election.elect_late(state, now)


# (state, the event, now) -> effects: each kind of stimulus to its rule; every timer's event to
# timers.py, every report to reports.py (which route them on by their own tables).
Rule = Callable[["PeerState", Any, float], Effects]

RULES: Routes[Rule] = Routes(
    "event",
    {
        Received: _received,
        MemberChanged: lambda s, e, now: restart.on_member_change(s, e.change, now),
        RunsHeard: _runs_heard,
        TuplesHeard: lambda s, e, now: orphans.on_tuples(s, e.tuples),
        OrphanTable: lambda s, e, now: orphans.got_table(s, e.tuples),
        shipping.CodeArrived: lambda s, e, now: shipping.on_code(s, e, now),
        logged.LogRead: lambda s, e, now: logged.on_read(s, e),
        **dict.fromkeys(timers.RULES.types(), timers.fire),
        **dict.fromkeys(reports.RULES.types(), reports.on_report),
    },
)


def handle(state: PeerState, event: Event, now: float) -> Effects:
    """The effects of one stimulus (see the module) at ``now``."""
    return RULES[event](state, event, now)
