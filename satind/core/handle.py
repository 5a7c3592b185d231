"""The protocol core's one entry: ``handle(state, event, now) -> effects``.

Every stimulus a peer's core decides on is one call here, with plain data (Dask's worker state
machine and h11 in shape): the events of ``core/events.py`` (a member's message, membership
and gossip news, what the node's procedures waited for: a submission parsed, a run judged, a
resume loaded, ...), what the compute side reported (``work/reports.py``), a timer that fired
(``core/model/timers.py``), shipped code that arrived or could not (``CodeArrived``,
core/shipping.py), and what a lost member's checkpoint log held (``LogRead``, core/logged.py).
Each goes to its rule by ``RULES`` (satind/routing.py). A test feeds the same call and compares
the effects by equality.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from satind.core import (
    barrier,
    custody,
    drain,
    election,
    here,
    lifecycle,
    logged,
    master,
    messages,
    orphans,
    reports,
    restart,
    shipping,
    timers,
    victim,
)
from satind.core.effects import Effects
from satind.core.events import (
    ArgsEncoded,
    CancelAsked,
    CheckpointsFound,
    CpuShareMeasured,
    CustodyRound,
    DrainAsked,
    DrainDeadlinePassed,
    DrainDone,
    DrainRound,
    MasterAnswered,
    MemberChanged,
    OrphanTable,
    PluginsChanged,
    Received,
    ReclaimChanged,
    ReplyNotSent,
    ResumeLoaded,
    RunJudged,
    RunsHeard,
    SubmissionParsed,
    SuspendAsked,
    Synced,
    TuplesHeard,
)
from satind.core.model.timers import TimerEvent
from satind.routing import Routes
from satind.work.reports import Report

if TYPE_CHECKING:
    from satind.core.state import PeerState


Event = (
    Received
    | MemberChanged
    | RunsHeard
    | TuplesHeard
    | OrphanTable
    | SubmissionParsed
    | RunJudged
    | ResumeLoaded
    | SuspendAsked
    | CancelAsked
    | MasterAnswered
    | ArgsEncoded
    | ReplyNotSent
    | CustodyRound
    | DrainAsked
    | DrainRound
    | DrainDeadlinePassed
    | DrainDone
    | Synced
    | ReclaimChanged
    | PluginsChanged
    | CheckpointsFound
    | CpuShareMeasured
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
        SubmissionParsed: lambda s, e, now: master.submit(s, e.link, e.msg, e.parsed, now),
        RunJudged: lambda s, e, now: master.finish(
            s, e.run_id, e.shares, now, e.verdict, e.root_done
        ),
        ResumeLoaded: lambda s, e, now: master.resume(
            s, e.link, e.req, e.info, e.results, now, e.barrier
        ),
        SuspendAsked: lambda s, e, now: master.suspend(s, e.run_id, now),
        CancelAsked: lambda s, e, now: master.cancel(s, e.run_id, now),
        MasterAnswered: lambda s, e, now: lifecycle.check_answered(s, e.run_id, e.reply),
        ArgsEncoded: lambda s, e, now: victim.hand_out(
            s, e.link, e.request, e.job, e.args, now, e.shared
        ),
        ReplyNotSent: lambda s, e, now: victim.not_handed_out(s, e.reply, e.job, e.more),
        # A run whose master is gone and that nobody took over (the peer the election named
        # did not know the run then) is taken over once its successor knows it.
        CustodyRound: lambda s, e, now: custody.custody_tick(s, now) + election.elect_late(s, now),
        DrainAsked: lambda s, e, now: drain.start(s, e.reason, now, e.leaving),
        DrainRound: lambda s, e, now: drain.hand_over_runs(s),
        DrainDeadlinePassed: lambda s, e, now: drain.cut(s),
        DrainDone: lambda s, e, now: drain.leave(s),
        Synced: lambda s, e, now: here.synced(s),
        ReclaimChanged: lambda s, e, now: here.reclaim_changed(s, e.reclaimed, e.standby),
        PluginsChanged: lambda s, e, now: here.plugins_changed(s, e.found, e.unmet),
        CheckpointsFound: lambda s, e, now: here.checkpoints_found(s, e.runs),
        CpuShareMeasured: lambda s, e, now: here.cpu_share_measured(s, e.share),
        **dict.fromkeys(timers.RULES.types(), timers.fire),
        **dict.fromkeys(reports.RULES.types(), reports.on_report),
    },
)


def handle(state: PeerState, event: Event, now: float) -> Effects:
    """The effects of one stimulus (see the module) at ``now``."""
    if not barrier.ON:
        return RULES[event](state, event, now)
    state.__dict__["_sealed"] = True  # its set-up is over (core/barrier.py)
    barrier.enter()
    try:
        return RULES[event](state, event, now)
    finally:
        barrier.leave()
