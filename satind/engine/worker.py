"""The compute thread of one peer: run jobs, spawn, sync, and wait by stealing.

One peer has one compute thread and one trio thread (DESIGN "One peer"). They meet here:

* the work queue: the compute thread pushes and pops its head, the trio thread steals its
  tail for other peers;
* the mailbox: the trio thread posts events (a job stolen for us, the result of a child that
  another peer ran, stop) and raises ``attention``; the compute thread drains the mailbox at
  safe points (every sync, and whenever it has nothing to run);
* the hooks: the compute thread tells the trio side that it wants work (so stealing starts)
  and that a job without a local parent finished (a root, or a job stolen from a peer whose
  result must travel back). The hooks must not block; the peer implements them with
  ``TrioToken.run_sync_soon``.

Spawn and sync follow Satin §4.1.1 without a bytecode rewriter: a spawn records a ``Job`` and
pushes it at the head of the queue; sync runs jobs from the head until the current frame has
no pending children; when the children left are stolen, it helps: it runs whatever local work
there is and then asks for stolen work, until the results come back. Every job ends with an
implicit sync, so no child outlives its parent (as in Cilk).
"""

from __future__ import annotations

import gc
import queue
import sys
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import trio

from satind.config import EngineConfig
from satind.engine.errors import LimitExceeded
from satind.engine.jobs import UNSET, Job, RunState, is_ancestor
from satind.engine.workqueue import WorkQueue

# The worker of this process while its compute thread runs, else None. A module global, not a
# thread-local: a peer has exactly one compute thread, and a global read is the cheapest
# lookup on the spawn path. None means "no satind here": spawns run as plain calls.
CURRENT: Worker | None = None


class WorkerHooks(Protocol):
    """How the compute thread reaches the trio side. Both calls must return at once."""

    def want_work(self, wanted: bool, run_id: str = "") -> None:
        """The worker has nothing to run (True) or has work again (False). ``run_id``: the
        wait is a sync inside a job of that run, which takes only jobs of its own run (a job
        of another run started on top of it would hold its frame hostage until it ended);
        empty: any work will do."""

    def job_finished(self, job: Job) -> None:
        """A job with no local parent (a root or a stolen job) finished: send its result."""

    def orphan_hit(self, job: Job, holder: str) -> None:
        """A job just spawned is an orphan ``holder`` keeps the result of: fetch it."""

    def orphan_result(self, job: Job) -> None:
        """A finished job below an aborted orphan frame: keep its result and announce it."""

    def job_logged(self, job: Job) -> None:
        """Log this finished job's result (checkpoint policies "sel" and "tic")."""

    def snapshot_taken(self) -> None:
        """A Snapshot was handled: every result it logged has been reported."""


@dataclass(frozen=True, slots=True)
class JobArrived:
    """A job for this worker: a run's root on its master, or work stolen from a peer."""

    job: Job


@dataclass(frozen=True, slots=True)
class ChildResult:
    """The result of a child that another peer ran after stealing it from us."""

    job: Job
    value: Any
    exc: BaseException | None


@dataclass(frozen=True, slots=True)
class Orphaned:
    """``job``, stolen from a peer that is gone, is the root of an orphan subtree: abort its
    unfinished frames and keep what is finished (satin-fault-tolerance §3.2)."""

    job: Job


@dataclass(frozen=True, slots=True)
class Stop:
    """Unwind the compute thread."""


@dataclass(frozen=True, slots=True)
class Wakeup:
    """Only wakes the compute thread (so that it notices an aborted run)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Report the finished children of every open frame that were not reported yet: the
    state a theft-induced checkpoint saves (kaapi §3.3, the process's part of the graph)."""


MailboxEvent = JobArrived | ChildResult | Orphaned | Stop | Wakeup | Snapshot


class RunAborted(BaseException):
    """Raised in a frame that waits for children of a run that is already over (its result was
    obtained another way, or it failed). It unwinds that run's frames up to the job that came
    from outside (a stolen job or the root), which is then dropped without a result. A
    BaseException, so plugin code's ``except Exception`` cannot swallow it."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.run_id = run_id


class SubtreeAborted(BaseException):
    """Raised in a frame of an orphan subtree (see Orphaned). It unwinds the subtree's frames
    up to its root, each one abandoned on the way (``abandon``); the root is dropped. Frames
    below the root, of other work, go on."""

    def __init__(self, root: Job) -> None:
        super().__init__(root)
        self.root = root


class WorkerStopped(BaseException):
    """Raised on the compute thread at a safe point after ``Worker.stop``; unwinds every job."""


class Compute(Protocol):
    """The compute side as a peer sees it: the thread-backed ``Worker``, or the simulator's
    executor that runs synthetic jobs in virtual time."""

    queue: WorkQueue
    # Frames in progress (0: no job is running or waiting in a sync). Written by the compute
    # side only; the peer reads it to know a drain is over.
    nesting: int
    # Report every finished job through ``job_logged`` (checkpoint policy "sel").
    log_all: bool

    def post(self, event: MailboxEvent) -> None: ...

    def stop(self) -> None: ...

    async def serve(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...


def _idle_run() -> RunState:
    return RunState(run_id="", plugin="", inv_branching=0.0)


class Worker:
    """The compute side of a peer. ``run_forever`` is the body of the compute thread."""

    def __init__(self, cfg: EngineConfig, hooks: WorkerHooks) -> None:
        self.cfg = cfg
        self.hooks = hooks
        self.queue = WorkQueue()
        # The queue's deque itself, bound once for the spawn and sync hot paths.
        self.jobs = self.queue.jobs
        self.mailbox: queue.SimpleQueue[MailboxEvent] = queue.SimpleQueue()
        # Set by the trio thread after it posts to the mailbox; read at every sync.
        self.attention = False
        # The frame of the job running now. Outside any job it is a sentinel that never has
        # children, so sync() at the top level is a no-op rather than a special case.
        self.idle_frame = Job(_noop, (), None, 0, _idle_run(), 0.0)
        self.current: Job = self.idle_frame
        # Stolen or root jobs on the stack right now (bounded by cfg.max_steal_nesting).
        self.nesting = 0
        # Jobs on the stack right now (bounded by cfg.max_depth), and the bounds.
        self.depth = 0
        self.max_depth = cfg.max_depth
        self.max_queued = cfg.max_queued_jobs
        # Roots of orphan subtrees (Orphaned): their frames are aborted at their next sync.
        self.cut: set[Job] = set()
        # Report every finished job (checkpoint policy "sel", systematic event logging).
        self.log_all = False
        # Snapshots (checkpoint policy "tic"): the frame each root or stolen job on the stack
        # runs under, and each open frame's newest child already reported.
        self.under: dict[Job, Job | None] = {}
        self.reported: dict[Job, Job | None] = {}
        self._wanting = False
        self._stopped = False

    # -- called from the trio thread ---------------------------------------------------

    def post(self, event: MailboxEvent) -> None:
        """Thread-safe: hand an event to the compute thread."""
        self.mailbox.put(event)
        # After the put: the compute thread clears the flag before draining, so an event is
        # never left behind with the flag down.
        self.attention = True

    def stop(self) -> None:
        """Thread-safe: make the compute thread unwind at its next safe point."""
        self._stopped = True
        self.post(Stop())

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the compute thread while this task runs; stop it when the task is cancelled."""
        previous = threading.stack_size()
        threading.stack_size(self.cfg.thread_stack_bytes)
        try:
            thread = threading.Thread(target=self.run_forever, name="satind-compute", daemon=True)
            thread.start()
        finally:
            threading.stack_size(previous)
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            self.stop()
            # A job deep in a long leaf reaches no safe point; the thread is a daemon, so the
            # process can still exit. The join is short and happens once, at shutdown.
            thread.join(timeout=1.0)

    # -- the compute thread ------------------------------------------------------------

    def run_forever(self) -> None:
        """Run jobs until stopped. The body of the compute thread."""
        global CURRENT
        sys.setrecursionlimit(max(sys.getrecursionlimit(), self.cfg.recursion_limit))
        CURRENT = self
        try:
            while not self._stopped:
                job = self.queue.pop()
                if job is None:
                    self._wait()
                else:
                    if self._wanting:  # a root put in the queue by the trio side
                        self._wanting = False
                        self.hooks.want_work(False)
                    try:
                        self.run_job(job)
                    except (WorkerStopped, RunAborted, SubtreeAborted):
                        raise
                    except Exception as exc:
                        self._engine_failed(job, exc, self.idle_frame, 0)
        except WorkerStopped:
            pass
        finally:
            CURRENT = None

    def run_job(self, job: Job) -> None:
        """Run one job to completion on this thread, children included, and report it."""
        parent = job.parent
        if parent is None:
            if job.run.aborted or (self.cut and job in self.cut):
                return  # a job of a run that is over, or an orphan not started: drop it
            self.nesting += 1
            self.under[job] = self.current
        elif job.run.orphans is not None and self.adopt(job):
            return  # a tuple came in while it waited in the queue: its result is kept

        prev = self.current
        self.current = job
        depth = self.depth + 1
        self.depth = depth
        try:
            try:
                if depth > self.max_depth:
                    raise too_deep(job, depth, self.max_depth)
                job.value = job.fn(*job.args)
            except (WorkerStopped, RunAborted, SubtreeAborted):
                raise
            except Exception as exc:
                job.exc = exc
            if job.pending:
                # Implicit sync at the end of every job, also when it raised: a child must not
                # outlive its parent, and the queue must hold no child of a finished frame.
                self.sync_frame(job)
        except RunAborted as aborted:
            self.current = prev
            self.depth = depth - 1
            if parent is None:
                del self.under[job]
            if parent is not None or aborted.run_id != job.run.run_id:
                raise
            self.nesting -= 1  # the run's outermost frame here: drop it, report nothing
            return
        except SubtreeAborted:
            self.current = prev
            self.depth = depth - 1
            abandon(job, self.jobs, self.hooks)
            if parent is not None and parent is prev:
                raise  # unwind the parent's frame too
            # The subtree's root (dropped, nothing to report); or a child that ran under
            # another frame (restarted work runs wherever the queue gives it), whose parent's
            # frame sees the cut itself. The frame below may be cut too: make it look.
            if parent is None:
                self.nesting -= 1
                del self.under[job]
            self.attention = True
            return
        self.current = prev
        self.depth = depth - 1
        account(job)
        if self.log_all:
            self.hooks.job_logged(job)
        if parent is not None:
            # finish(job, parent), inlined: this is every job's path.
            parent.pending -= 1
            job.sib = parent.kids
            parent.kids = job
        else:
            self.nesting -= 1
            del self.under[job]
            self.hooks.job_finished(job)
            if self.cut:
                self.attention = True  # the frame below may have been cut meanwhile

    def adopt(self, job: Job) -> bool:
        """At spawn, in a run with orphans: if this job's result is kept somewhere, link the
        job to it instead of queueing it (satin-ft §3.2). The table is shared with the trio
        thread; single dict operations are atomic under the GIL."""
        return adopt(job, self.hooks)

    def sync_frame(self, frame: Job) -> None:
        """Run or wait for work until ``frame`` has no pending children."""
        jobs = self.jobs
        while frame.pending:
            if self.attention:
                self.drain()
                if self.cut and (root := root_of(frame)) in self.cut:
                    raise SubtreeAborted(root)
                continue
            try:
                job = jobs.pop()
            except IndexError:
                # Every child left is out on another peer: help until their results are in.
                self._wait()
                continue
            depth = self.depth
            try:
                self.run_job(job)
            except RunAborted as aborted:
                self.depth = depth
                if aborted.run_id == frame.run.run_id:
                    raise
                # A job of another run that is over (restarted work runs wherever the queue
                # gives it) unwound up to this frame's sync: it is dropped, this frame goes on.
            except (WorkerStopped, SubtreeAborted):
                raise
            except Exception as exc:
                self._engine_failed(job, exc, frame, depth)
        if self._wanting:
            self._wanting = False
            self.hooks.want_work(False)

    def drain(self) -> None:
        """Handle every event in the mailbox without blocking."""
        self.attention = False
        mailbox = self.mailbox
        while True:
            try:
                event = mailbox.get_nowait()
            except queue.Empty:
                return
            self._handle(event)

    def _engine_failed(self, job: Job, exc: Exception, frame: Job, depth: int) -> None:
        """Engine code itself raised while running ``job`` (a RecursionError at the very
        bottom of the stack, a bug): the job must not be lost with it, or its parent would
        wait forever. It fails with that error, and the frame below goes on."""
        self.current = frame
        self.depth = depth
        if job.error is None and job.value is UNSET:
            job.exc = exc
        if job.parent is not None:
            if not hasattr(job, "sib"):  # not linked to its parent yet: it finishes now
                finish(job, job.parent)
        elif self.nesting > 0 and job in self.under:
            self.nesting -= 1
            del self.under[job]
            self.hooks.job_finished(job)

    def _wait(self) -> None:
        """Nothing local to run: ask for work unless nested too deep, block for one event.

        Raises:
            RunAborted: the frame waits for children of a run that is over.
        """
        if self.current.run.aborted:
            raise RunAborted(self.current.run.run_id)
        if (
            not self._wanting
            and self.nesting < self.cfg.max_steal_nesting
            and self.depth < self.max_depth // 2
        ):
            self._wanting = True
            # A sync waits inside a job (not the idle frame): it takes only its own run's jobs.
            self.hooks.want_work(True, self.current.run.run_id)
        self.attention = False
        try:
            event = self.mailbox.get(timeout=1.0)
        except queue.Empty:
            return
        self._handle(event)
        self.drain()
        if self.cut:
            self.attention = True  # an Orphaned event may have been handled: look at the cut

    def _handle(self, event: MailboxEvent) -> None:
        if isinstance(event, JobArrived):
            if self.cut and root_of(event.job) in self.cut:
                return  # a restarted child of an aborted orphan subtree: nobody waits for it
            # Work is here (stolen for us, or a root): stop asking. The thief stops by itself
            # when it delivers, but a root or a late steal reply does not go through it.
            if self._wanting:
                self._wanting = False
                self.hooks.want_work(False)
            self.jobs.append(event.job)
        elif isinstance(event, ChildResult):
            unparented = apply_result(event)
            if unparented is not None:
                self.hooks.job_finished(unparented)
            elif self.cut:
                orphaned_result(event, self.cut, self.hooks)
        elif isinstance(event, Orphaned):
            cut_subtree(event.job, self.cut)
            self.attention = True
        elif isinstance(event, Snapshot):
            self.reported = snapshot(self.current, self.under, self.reported, self.hooks)
        elif isinstance(event, Stop):
            raise WorkerStopped


def too_deep(job: Job, depth: int, limit: int) -> LimitExceeded:
    return LimitExceeded(
        f"a job of run {job.run.run_id} would nest {depth} jobs deep on this peer "
        f"(engine.max_depth is {limit}): does a spawnable function recurse without a base "
        "case? For a tree that deep, raise engine.max_depth and engine.recursion_limit"
    )


def tune_process(cfg: EngineConfig) -> None:
    """Process-wide interpreter settings for a peer process (the compute thread shares the
    interpreter with the trio thread): GIL switch interval and young-generation GC threshold
    (see EngineConfig)."""
    sys.setswitchinterval(cfg.switch_interval_s)
    if cfg.gc_young_threshold > 0:
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(cfg.gc_young_threshold, older, oldest)


def account(job: Job) -> None:
    """Count a finished job in its run's counters (shared by every compute side)."""
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
    True; the job is then not run here. Shared by every compute side."""
    table = job.run.orphans
    holder = table.get(job.path) if table is not None else None
    if holder is None:
        return False
    hooks.orphan_hit(job, holder)
    return True


def finish(job: Job, parent: Job) -> None:
    """A child finished: one less to wait for, and one more its parent keeps if aborted."""
    parent.pending -= 1
    job.sib = parent.kids
    parent.kids = job


def snapshot(
    current: Job | None,
    under: dict[Job, Job | None],
    reported: dict[Job, Job | None],
    hooks: WorkerHooks,
) -> dict[Job, Job | None]:
    """Handle Snapshot (shared by every compute side): walk the open frames from the
    innermost (``current``) down the stack, and log each finished child not logged at the
    previous snapshot. Children are linked newest first, so a frame's walk stops at the child
    that was its newest last time. Returns the new newest child of each open frame (frames
    that ended are dropped with it)."""
    now: dict[Job, Job | None] = {}
    frame = current
    while frame is not None and frame not in now:
        newest = frame.kids
        stop = reported.get(frame)
        kid = newest
        while kid is not None and kid is not stop:
            if kid.error is None:
                hooks.job_logged(kid)
            kid = kid.sib
        now[frame] = newest
        # Down the stack: a child's frame runs in its parent's; a root or a stolen job runs
        # in the frame that was current when it started (None at the bottom).
        frame = under.get(frame) if frame.parent is None else frame.parent
    hooks.snapshot_taken()
    return now


def root_of(job: Job) -> Job:
    """The job at the bottom of ``job``'s frame chain here (a root or a stolen job)."""
    while job.parent is not None:
        job = job.parent
    return job


def abandon(frame: Job, jobs: deque[Job], hooks: WorkerHooks) -> None:
    """Abort a frame of an orphan subtree (satin-fault-tolerance §3.2): its finished children
    are kept as orphans; its children still queued here go, since the restarted parent spawns
    them again. Children other peers stole come back as results and are kept then (the
    compute side's ChildResult handling)."""
    while True:
        try:
            job = jobs.pop()  # the owner's end: thieves take from the other one
        except IndexError:
            break
        if job.parent is not frame:
            jobs.append(job)  # not ours: the queued children of a frame are on top
            break
    kid = frame.kids
    while kid is not None:
        if kid.error is None:
            hooks.orphan_result(kid)
        kid = kid.sib
    frame.kids = None


def cut_subtree(root: Job, cut: set[Job]) -> None:
    """Handle Orphaned: remember the subtree's root (until its run is over)."""
    for job in [j for j in cut if j.run.aborted]:
        cut.discard(job)
    if not root.done and not root.run.aborted:
        cut.add(root)


def orphaned_result(event: ChildResult, cut: set[Job], hooks: WorkerHooks) -> None:
    """A result another peer sent for a child in an orphan subtree: it has no frame to go to
    (or soon will not): keep it as an orphan."""
    job = event.job
    if event.exc is None and job.parent is not None and root_of(job) in cut:
        hooks.orphan_result(job)


def apply_result(event: ChildResult) -> Job | None:
    """Apply the result of a job another peer ran, at most once. Returns the job when it has
    no local parent (its result must travel on), else None."""
    job = event.job
    if job.done:
        return None  # a duplicate: a result is applied to its parent at most once
    if event.exc is not None:
        job.exc = event.exc
    else:
        job.value = event.value
    parent = job.parent
    if parent is not None:
        finish(job, parent)
        return None
    # A job without a local parent that a thief took from our queue: a root, or work we
    # stole ourselves and that was stolen on.
    return job


def _noop() -> None:
    return None


def make_root(fn: Callable[..., Any], args: tuple[Any, ...], run: RunState) -> Job:
    """The root job of a run: no parent, path empty, the whole tree's share."""
    job = Job(fn, args, None, 0, run, 1.0)
    job.set_path(b"")
    job.origin = None
    return job


__all__ = [
    "UNSET",
    "ChildResult",
    "Job",
    "JobArrived",
    "Orphaned",
    "Snapshot",
    "Stop",
    "SubtreeAborted",
    "Worker",
    "WorkerHooks",
    "WorkerStopped",
    "make_root",
    "tune_process",
]
