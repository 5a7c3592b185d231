"""What the compute side reported (``work/reports.py``), into the core: one entry for the whole
stream. Each report goes to the rule of its mechanism — a finished job's result, an orphan to
fetch or keep, an aborted subtree, shared objects' calls and waits, a driven root's task, an
iterative barrier, an SPMD entity's step — and what the rule decides comes back as effects.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from satind.core import aborts, drain, iterative, kinds, orphans, sharing, spmd, thief
from satind.core.effects import Changed, Effects, Log
from satind.net import messages as m
from satind.routing import Routes
from satind.work.reports import (
    BarrierPassed,
    ChildrenAborted,
    EntityDone,
    GuardWaiting,
    JobFinished,
    JobLogged,
    OrphanHit,
    OrphanResult,
    ReplicaKept,
    Report,
    ResultWaiting,
    SharedCallMade,
    SharedSend,
    SnapshotTaken,
    SpmdIteration,
    SubtreeDropped,
    TaskReady,
    WantWork,
)

if TYPE_CHECKING:
    from satind.core.state import PeerState


def _job_finished(state: PeerState, event: JobFinished, now: float) -> Effects:
    # A step inside an SPMD job's span ends here; every other job goes on.
    stepped = spmd.step_finished(state, event.job, now)
    return thief.job_finished(state, event.job) if stepped is None else stepped


def _want_work(state: PeerState, event: WantWork, now: float) -> Effects:
    state.worker_idle = event.wanted
    state.worker_frames = event.frames
    return [Changed()]  # a drain may wait for an idle compute side


def _subtree_dropped(state: PeerState, event: SubtreeDropped, now: float) -> Effects:
    if aborts.dropped(state, event.job):
        return [Changed()]  # a drain may wait for it
    return drain.root_dropped(state, event.job, now)


def _entity_done(state: PeerState, event: EntityDone, now: float) -> Effects:
    return spmd.entity_done(
        state,
        event.run_id,
        event.entity,
        event.gen,
        event.iteration,
        event.state,
        event.ghosts,
        event.measured,
        now,
    )


def _spmd_iteration(state: PeerState, event: SpmdIteration, now: float) -> Effects:
    spmd.profile(state, event.run_id, event.iteration, event.profiles)
    return []


def _job_logged(state: PeerState, event: JobLogged, now: float) -> Effects:
    job = event.job
    return [Log("result", m.JobResult(job.run.run_id, job.path, event.value, None))]


# (state, the report, now) -> effects.
Rule = Callable[["PeerState", Any, float], Effects]

RULES: Routes[Rule] = Routes(
    "report",
    {
        JobFinished: _job_finished,
        WantWork: _want_work,
        OrphanHit: lambda s, e, now: orphans.fetch_orphan(s, e.job, e.holder, now),
        OrphanResult: lambda s, e, now: orphans.keep_finished(s, e.job, e.value),
        SubtreeDropped: _subtree_dropped,
        ChildrenAborted: lambda s, e, now: aborts.children_aborted(s, e.frame),
        SharedCallMade: lambda s, e, now: sharing.call_made(s, e.update),
        ReplicaKept: lambda s, e, now: sharing.replica_kept(s, e.shared_id, e.kept),
        SharedSend: lambda s, e, now: sharing.shared_send(s, e.peer, e.msg),
        GuardWaiting: lambda s, e, now: sharing.guard_waiting(s, e.job, e.waiting),
        ResultWaiting: lambda s, e, now: sharing.result_waiting(s, e.job, e.sender, e.waiting),
        TaskReady: lambda s, e, now: kinds.task_ready(s, e.job, now),
        BarrierPassed: lambda s, e, now: iterative.barrier(s, e.run_id, e.iteration, e.state),
        EntityDone: _entity_done,
        SpmdIteration: _spmd_iteration,
        JobLogged: _job_logged,
        # The checkpoint writer's news (node/hooks.py), nothing for the core.
        SnapshotTaken: lambda s, e, now: [],
    },
)


def on_report(state: PeerState, event: Report, now: float) -> Effects:
    """The effects of one report of the compute side, received at ``now``."""
    return RULES[event](state, event, now)
