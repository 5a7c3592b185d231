"""What the compute side reported (``work/reports.py``), into the core: one entry for the whole
stream. Each report goes to the rule of its mechanism — a finished job's result, an orphan to
fetch or keep, an aborted subtree, shared objects' calls and waits, a driven root's task, an
iterative barrier, an SPMD entity's step — and what the rule decides comes back as effects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from satind.core import aborts, drain, iterative, kinds, orphans, sharing, spmd, thief
from satind.core.effects import Changed, Effects, Log
from satind.net import messages as m
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


def on_report(state: PeerState, event: Report, now: float) -> Effects:
    """The effects of one report of the compute side, received at ``now``."""
    if isinstance(event, JobFinished):
        # A step inside an SPMD job's span ends here; every other job goes on.
        stepped = spmd.step_finished(state, event.job, now)
        return thief.job_finished(state, event.job) if stepped is None else stepped
    if isinstance(event, WantWork):
        state.worker_idle = event.wanted
        state.worker_frames = event.frames
        return [Changed()]  # a drain may wait for an idle compute side
    if isinstance(event, OrphanHit):
        return orphans.fetch_orphan(state, event.job, event.holder, now)
    if isinstance(event, OrphanResult):
        return orphans.keep_finished(state, event.job, event.value)
    if isinstance(event, SubtreeDropped):
        if aborts.dropped(state, event.job):
            return [Changed()]  # a drain may wait for it
        return drain.root_dropped(state, event.job, now)
    if isinstance(event, ChildrenAborted):
        return aborts.children_aborted(state, event.frame)
    if isinstance(event, SharedCallMade):
        return sharing.call_made(state, event.update)
    if isinstance(event, ReplicaKept):
        return sharing.replica_kept(state, event.shared_id, event.kept)
    if isinstance(event, SharedSend):
        return sharing.shared_send(state, event.peer, event.msg)
    if isinstance(event, GuardWaiting):
        return sharing.guard_waiting(state, event.job, event.waiting)
    if isinstance(event, ResultWaiting):
        return sharing.result_waiting(state, event.job, event.sender, event.waiting)
    if isinstance(event, TaskReady):
        return kinds.task_ready(state, event.job, now)
    if isinstance(event, BarrierPassed):
        return iterative.barrier(state, event.run_id, event.iteration, event.state)
    if isinstance(event, EntityDone):
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
    if isinstance(event, SpmdIteration):
        spmd.profile(state, event.run_id, event.iteration, event.profiles)
        return []
    if isinstance(event, JobLogged):
        job = event.job
        return [Log("result", m.JobResult(job.run.run_id, job.path, event.value, None))]
    if isinstance(event, SnapshotTaken):
        return []  # the checkpoint writer's news (node/hooks.py), nothing for the core
    raise TypeError(f"no rule for the report {event!r}")
