"""Restart: the work a lost member took is computed again (satin-fault-tolerance §3.1).

Every peer keeps the list of jobs stolen from it and by whom (core/custody.py). When a member
is declared dead, or has left, or comes back as a new instance (its old process is gone), each
peer puts the jobs that member stole from it back in its own queue, marked as restarted; the
children they spawn again are restarted too. The member's own work for others goes the other
way: the jobs it gave us have no parent any more — their frames here are aborted and what they
finished is kept (abort.py, orphans.py) — and the results we sent it may never have been
applied, so we keep them as orphans as well. Then the master election looks at runs whose
master it was (election.py).

A member declared dead that was in fact alive (a partition, a long pause) is harmless: custody
has forgotten the jobs, so its late results are ignored, and the answer stays exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from satind.core import kinds, logged
from satind.core.effects import INFO, Changed, Effects, ToCompute
from satind.core.election import elect
from satind.core.model.orphans import Orphans
from satind.core.orphans import keep_orphan
from satind.membership.view import Change
from satind.work.events import JobArrived, Orphaned
from satind.work.jobs import Job

if TYPE_CHECKING:
    from satind.core.state import PeerState


def on_member_change(state: PeerState, change: Change, now: float) -> Effects:
    """Membership news: a member that is gone — dead, left, or replaced by a newer instance
    of its slot (membership/view.py) — loses what it took; a run it mastered gets a new
    master."""
    fx: Effects = [Changed()]
    after = change.after
    if after.state.gone:
        fx += restart_jobs_of(state, after.name, after.state.label)
        for kind in kinds.each():
            if kind.member_gone is not None:
                fx += kind.member_gone(state, after.name)
        fx += elect(state, now)
    return fx


def restart_jobs_of(state: PeerState, thief: str, why: str) -> Effects:
    """Jobs ``thief`` stole from us are lost with it: back in our queue they go."""
    fx: Effects = []
    again: list[Job] = []
    for job in state.custody.take_back_all(thief):
        if job.run.aborted:
            continue
        kind = kinds.of_job(job)
        if kind is not None and kind.lost is not None:
            # An SPMD run rolls back; an iterative run's task is placed again (core/kinds.py).
            fx += kind.lost(state, job, thief, why)
            continue
        state.steal.jobs_restarted += 1
        state.note(
            INFO, __name__, "restarting %s%s: %s is %s", job.run.run_id, job.path.hex(), thief, why
        )
        again.append(job)
    if again and state.checkpoint.enabled and state.cfg.ft.orphans:
        # What it logged below them is reused, not computed again (core/logged.py).
        fx += logged.hold(state, thief, again)
    else:
        fx += [ToCompute(JobArrived(job, restarted=True)) for job in again]
    if state.cfg.ft.orphans:
        # Jobs we took from it have no parent to return to: abort their unfinished frames and
        # keep what they finished (§3.2; abort.py).
        for job in state.custody.orphaned_by(thief):
            if kinds.dropped_unstarted(state, job):
                continue  # e.g. a step of a lost master's SPMD run that never started
            fx.append(ToCompute(Orphaned(job)))
        # Results we sent it may never have been applied: keep them as orphans.
        for result in state.custody.sent_to(thief):
            fx += keep_orphan(state, result)
        # And what it kept is gone with it: its tuples no longer point anywhere.
        for run in state.runs.active.values():
            Orphans.forget_holder(run.state, thief)
    return fx
