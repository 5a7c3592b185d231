"""What happens to frames, written once: the mailbox events the network side sends the compute
side, the exceptions that unwind frames, and the transitions of a job's life (accounted,
linked to its parent, adopted from an orphan table, its result applied once, its frames
walked for a snapshot).

The compute side (``worker.Worker``) is the control flow around these: where a job starts,
how a sync loops and how it waits. There is one compute side for every driver — a real peer
runs it on a thread with a blocking mailbox (``node/compute.py``), the simulator runs the same
code in lockstep with virtual time (``sim/lockstep.py``) — so a transition fixed here is fixed
for both. The abort of orphan subtrees (the compute side of recovery): ``engine/unwind.py``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from satind.work.errors import LimitExceeded
from satind.work.events import Cancel as Cancel
from satind.work.events import ChildResult as ChildResult
from satind.work.events import DigestArrived as DigestArrived
from satind.work.events import DigestWanted as DigestWanted
from satind.work.events import ForgetRun as ForgetRun
from satind.work.events import JobArrived as JobArrived
from satind.work.events import MailboxEvent as MailboxEvent
from satind.work.events import Orphaned as Orphaned
from satind.work.events import ReplicaArrived as ReplicaArrived
from satind.work.events import ReplicaWanted as ReplicaWanted
from satind.work.events import ResultDue as ResultDue
from satind.work.events import Snapshot as Snapshot
from satind.work.events import Stop as Stop
from satind.work.events import UpdatesArrived as UpdatesArrived
from satind.work.events import Wakeup as Wakeup
from satind.work.jobs import UNSET, Job, RunState, is_ancestor
from satind.work.jobs import make_root as make_root
from satind.work.jobs import root_of as root_of
from satind.work.reports import OrphanHit, Report


class WorkerHooks(Protocol):
    """How the compute side reaches the network side: one typed stream of reports
    (``work/reports.py``). ``report`` must return at once (the real peer hops to its trio
    thread with ``TrioToken.run_sync_soon``)."""

    def report(self, event: Report) -> None: ...


# -- exceptions that unwind frames --------------------------------------------------------------


class RunAborted(BaseException):
    """Raised in a frame that waits for children of a run that is already over (its result was
    obtained another way, or it failed). It unwinds that run's frames up to the job that came
    from outside (a stolen job or the root), which is then dropped without a result. A
    BaseException, so plugin code's ``except Exception`` cannot swallow it."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.run_id = run_id


class WorkerStopped(BaseException):
    """Raised on the compute side at a safe point after ``Worker.stop``; unwinds every job."""


# -- transitions ----------------------------------------------------------------------------


def account(job: Job) -> None:
    """Count a finished job in its run's counters."""
    run = job.run
    run.jobs_run += 1
    run.syncs += job.nsync
    # A job's share of the tree goes to its children as it spawns them; what is left (all of
    # it for a leaf) is finished now. The shares of a finished run sum to 1.
    nspawn = job.nspawn
    if nspawn:
        run.spawns += nspawn
        run.progress += job.share * (1.0 - nspawn * run.inv_branching)
        job.kids = None  # its finished children no longer need to be reachable from it
    else:
        run.progress += job.share
        run.leaves_run += 1
        if run.redo is not None and any(is_ancestor(root, job.path) for root in run.redo):
            run.leaves_redone += 1


def adopt(job: Job, hooks: WorkerHooks) -> bool:
    """If ``job``'s result is kept somewhere (an orphan), tell the peer to fetch it and return
    True; the job is then not run here."""
    table = job.run.orphans
    holder = table.get(job.path) if table is not None else None
    if holder is None:
        return False
    hooks.report(OrphanHit(job, holder))
    return True


def finish(job: Job, parent: Job) -> None:
    """A child finished: one less to wait for, and one more its parent keeps if aborted."""
    parent.pending -= 1
    job.sib = parent.kids
    parent.kids = job


def linked(job: Job) -> bool:
    """Whether a finished child was already linked to its parent (``finish``)."""
    return hasattr(job, "sib")


def apply_result(job: Job, value: Any, exc: BaseException | None) -> Job | None:
    """Apply the result of a job another peer ran, at most once. Returns the job when it has
    no local parent (its result must travel on), else None."""
    if job.done:
        return None  # a duplicate: a result is applied to its parent at most once
    if exc is not None:
        job.exc = exc
    else:
        job.value = value
    parent = job.parent
    if parent is not None:
        finish(job, parent)
        return None
    # A job without a local parent that a thief took from our queue: a root, or work we
    # stole ourselves and that was stolen on.
    return job


def drop_queued_children(frame: Job, jobs: deque[Job]) -> None:
    """Drop the children of ``frame`` still in the queue (a frame that unwinds: nobody will
    sync for them). A frame's queued children are on top of the queue, the owner's end."""
    while True:
        try:
            job = jobs.pop()
        except IndexError:
            return
        if job.parent is not frame:
            jobs.append(job)  # not ours: put it back where it was
            return


def snapshot(
    current: Job | None,
    under: dict[Job, Job | None],
    reported: dict[Job, Job | None],
    log: Callable[[Job], None],
) -> dict[Job, Job | None]:
    """Handle Snapshot: walk the open frames from the innermost (``current``) down the
    stack, and ``log`` each finished child not logged at the previous snapshot. Children are
    linked newest first, so a frame's walk stops at the child that was its newest last time.
    Returns the new newest child of each open frame (frames that ended are dropped with it)."""
    now: dict[Job, Job | None] = {}
    frame = current
    while frame is not None and frame not in now:
        newest = frame.kids
        stop = reported.get(frame)
        kid = newest
        while kid is not None and kid is not stop:
            if kid.error is None:
                log(kid)
            kid = kid.sib
        now[frame] = newest
        # Down the stack: a child's frame runs in its parent's; a root or a stolen job runs
        # in the frame that was current when it started (None at the bottom).
        frame = under.get(frame) if frame.parent is None else frame.parent
    return now


def too_deep(job: Job, limit: int) -> LimitExceeded:
    return LimitExceeded(
        f"a job of run {job.run.run_id} nested deeper than this peer's compute thread allows "
        f"(engine.recursion_limit is {limit} frames): does a spawnable function recurse "
        "without a base case? For a tree that deep, raise engine.recursion_limit and "
        "engine.thread_stack_bytes"
    )


def too_many(limit: int) -> LimitExceeded:
    return LimitExceeded(
        f"a job spawned {limit} jobs without syncing (engine.max_pending_jobs): does it spawn "
        "without bound before it syncs? Spawn fewer, larger jobs, or raise the limit"
    )


def _noop() -> None:
    return None


def idle_frame() -> Job:
    """The frame of a compute side that runs no job: a sentinel that never has children, so
    sync() at the top level is a no-op rather than a special case."""
    return Job(_noop, (), None, 0, RunState(run_id="", plugin="", inv_branching=0.0), 0.0)


__all__ = [
    "UNSET",
    "Cancel",
    "ChildResult",
    "JobArrived",
    "MailboxEvent",
    "Orphaned",
    "ResultDue",
    "RunAborted",
    "Snapshot",
    "Stop",
    "Wakeup",
    "WorkerHooks",
    "WorkerStopped",
    "account",
    "adopt",
    "apply_result",
    "finish",
    "make_root",
    "root_of",
    "snapshot",
]
