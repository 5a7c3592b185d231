"""The compute side of one peer: run jobs, spawn, sync, and wait by stealing.

One peer has one compute side and one network side (DESIGN "One peer"). They meet here:

* the work queue: the compute side pushes and pops its head, the network side steals its
  tail for other peers (and puts a run's root at the tail);
* the mailbox: the network side posts events (a job stolen for us, the result of a child that
  another peer ran, stop) and raises ``attention``; the compute side drains the mailbox at
  safe points (every sync, and whenever it has nothing to run);
* the hooks (``frames.WorkerHooks``): the compute side tells the network side that it wants
  work (so stealing starts) and that a job without a local parent finished (a root, or a job
  stolen from a peer whose result must travel back). The hooks never block.

Spawn and sync follow Satin §4.1.1 without a bytecode rewriter: a spawn records a ``Job`` and
pushes it at the head of the queue (``api.Spawnable.spawn``); sync runs jobs from the head
until the current frame has no pending children; when the children left are stolen, it
helps: it runs whatever local work there is and then asks for stolen work, until the results
come back. Every job ends with an implicit sync, so no child outlives its parent (as in Cilk).

Application values cross between the sides encoded (``codec.Encoded``): the compute side
decodes the arguments of a job stolen for it and the results of its children others ran, and
encodes what it sends back, so the network side only moves bytes and never runs plugin code
or a long (de)serialization that would keep it from answering a probe in time.

This is the only compute side. A real peer drives it on a thread with a blocking mailbox
(``node/compute.py``); the simulator drives the very same code in lockstep with virtual time
(``sim/lockstep.py``). The transitions it is made of are in ``frames.py`` and, for orphan
subtrees, ``engine/unwind.py``. This module is its hot path — running a job, sync, waiting for
work, a child's result, inlets; what it holds and everything off that path (the mailbox's
events, aborts, shared objects' guards, values leaving the compute side, failures) is
``engine/worker_base.py``, which ``Worker`` extends (both compiled, one class to callers).
"""

from __future__ import annotations

import gc
import sys
import time
from typing import TYPE_CHECKING

from satind.config import EngineConfig
from satind.engine.frames import (
    ChildResult,
    RunAborted,
    WorkerStopped,
    account,
    adopt,
    apply_result,
    drop_queued_children,
    root_of,
    too_many,
)
from satind.engine.speculation import call_with_inlet
from satind.engine.unwind import SubtreeAborted, abandon, orphaned_result
from satind.engine.worker_base import GUARDS as GUARDS
from satind.engine.worker_base import Mailbox as Mailbox
from satind.engine.worker_base import ThreadMailbox as ThreadMailbox
from satind.engine.worker_base import WorkerBase
from satind.net.codec import DecodeError, Encoded, version_of
from satind.work.jobs import UNSET, Job, is_placed
from satind.work.reports import GuardWaiting, SubtreeDropped
from satind.work.workqueue import root_due

if TYPE_CHECKING:
    pass

# The worker of the compute side running now, else None. A module global, not a
# thread-local: a peer has exactly one compute side, and a global read is the cheapest lookup
# on the spawn path (the simulator sets it before it hands a worker the baton). None means
# "no satind here": spawns run as plain calls.
CURRENT: Worker | None = None


class Worker(WorkerBase):
    """The compute side of a peer. ``run_forever`` is its body."""

    # -- the compute side ------------------------------------------------------------------

    def run_forever(self) -> None:
        """Run jobs until stopped."""
        global CURRENT
        sys.setrecursionlimit(max(sys.getrecursionlimit(), self.cfg.recursion_limit))
        CURRENT = self
        try:
            while not self._stopped:
                job = self.queue.pop()
                if job is None:
                    self._wait()
                    continue
                if self._wanting:  # a root the network side queued, or a late steal
                    self._want(False)
                try:
                    self.run_job(job)
                except RunAborted:
                    # A job whose frame is gone (a child left queued when its frame unwound, or
                    # taken back from a dead thief after that) met its run's abort: there is
                    # no frame of its run to unwind to here. Dropped; the thread goes on (it
                    # died of this, and its peer stayed a member that never computed again).
                    self.current = self.idle_frame
                except (WorkerStopped, SubtreeAborted):
                    raise
                except Exception as exc:
                    self._engine_failed(job, exc, self.idle_frame)
        except WorkerStopped:
            pass
        finally:
            CURRENT = None

    def run_job(self, job: Job) -> None:
        """Run one job to completion, children included, and report it."""
        if self.reclaimed:
            self.suspend()
        parent = job.parent
        if parent is None:
            if job.run.aborted:
                return  # a job of a run that is over: drop it
            if self.cut and job in self.cut:
                self.hooks.report(SubtreeDropped(job))  # an orphan not started: drop it
                return
            if type(job.args) is Encoded and not self._decode_args(job):
                self._report(job)  # arguments that cannot be decoded: the job fails
                return
            if job.origin is not None and job.fn in GUARDS and not self._guard_ok(job):
                if job.error is not None:
                    self._report(job)  # its guard raised: the job fails with that
                else:
                    self.parked.append(job)  # it runs when its replicas satisfy the guard
                    self.hooks.report(GuardWaiting(job))
                return
            self.nesting += 1
            self.under[job] = self.current
            job.run.entered += 1
            # Only jobs without a local parent get here: the spawn path pays nothing.
            started, jobs_before = time.time(), job.run.jobs_run
            self._clock(job.run)
        elif job.run.orphans is not None and adopt(job, self.hooks):
            return  # a tuple came in while it waited in the queue: its result is kept

        prev = self.current
        self.current = job
        try:
            try:
                if job.inlet is None:
                    job.value = job.fn(*job.args)
                elif (raised := call_with_inlet(job)) is not None:
                    job.exc = self._failed(job, raised)
                    if parent is not None:
                        self._inlet_ready(job, parent, parent is prev and parent.pending == 1)
            except (WorkerStopped, RunAborted, SubtreeAborted):
                raise
            except Exception as exc:
                job.exc = self._failed(job, exc)
                if parent is not None and job.inlet is not None:
                    self._inlet_ready(job, parent, False)
            if job.pending:
                # Implicit sync at the end of every job, also when it raised: a child must not
                # outlive its parent, and the queue must hold no child of a finished frame.
                try:
                    self.sync_frame(job)
                except Exception as exc:
                    # An inlet raised after the job's code ended: the job fails with it.
                    job.value = UNSET
                    job.exc = self._failed(job, exc)
                    if (
                        parent is not None
                        and job.inlet is not None
                        and job not in self.ready.get(parent, ())
                    ):  # (its own code may have raised too: one handler call for the job)
                        self._inlet_ready(job, parent, False)
        except RunAborted as aborted:
            self.current = prev
            if self.ready:
                self.ready.pop(job, None)
            drop_queued_children(job, self.jobs)
            if parent is None:
                del self.under[job]
                self._clock(prev.run)
            if parent is not None or aborted.run_id != job.run.run_id:
                raise
            self.nesting -= 1  # the run's outermost frame here: drop it, report nothing
            return
        except SubtreeAborted as unwound:
            self.current = prev
            if self.ready:
                self.ready.pop(job, None)
            keep = self.cut.get(unwound.root, True)
            abandon(job, self.jobs, self._keep_orphan if keep else None)
            if parent is not None and parent is prev:
                raise  # unwind the parent's frame too
            # The subtree's root (dropped, nothing to report); or a child that ran under
            # another frame (restarted work runs wherever the queue gives it), whose parent's
            # frame sees the cut itself. The frame below may be cut too: make it look.
            if parent is None:
                self.nesting -= 1
                del self.under[job]
                self._clock(prev.run)
                if not keep:
                    self._cancelled(job, time.time() - started)
                self.hooks.report(SubtreeDropped(job))
            self.attention = True
            return
        self.current = prev
        account(job)
        if self.log_all:
            self._log(job)
        if parent is not None:
            # finish(job, parent), inlined: this is every job's path.
            parent.pending -= 1
            job.sib = parent.kids
            parent.kids = job
        else:
            self.nesting -= 1
            del self.under[job]
            self._clock(prev.run)
            if self.trace is not None:
                ran = job.run.jobs_run - jobs_before
                name = getattr(job.fn, "__name__", "job")
                self.trace.job(job.run.run_id, name, started, time.time(), ran)
            self._report(job)
            if self.cut:
                self.attention = True  # the frame below may have been cut meanwhile

    def _decode_args(self, job: Job) -> bool:
        """A stolen job's (or a respawned root's) arguments arrive encoded: they are decoded
        here, by the side that runs plugin code, not by the network side. False (and the
        job's error set) when they cannot be."""
        try:
            # The types a shipped version registered are that version's (net/values.py).
            args = job.args.decode(
                self.value_depth, version_of(getattr(job.fn, "__module__", None) or "")
            )
            if type(args) is not tuple:
                raise DecodeError("a job's arguments must be a tuple")
        except DecodeError as exc:
            job.exc = exc
            return False
        job.args = args
        return True

    def adopt(self, job: Job) -> bool:
        """At spawn, in a run with orphans: if this job's result is kept somewhere, link the
        job to it instead of queueing it (satin-ft §3.2). The table is shared with the network
        side; single dict operations are atomic under the GIL.

        If telling the peer fails (a RecursionError at the very bottom of the stack, or a
        bug), the job is queued after all: its result is computed again here rather than
        fetched, and it is never lost. ``spawn`` has already counted it as pending, so an
        exception out of here would leave its parent waiting forever.
        """
        try:
            return adopt(job, self.hooks)
        except Exception:
            return False

    def sync_frame(self, frame: Job) -> None:
        """Run or wait for work until ``frame`` has no pending children.

        Frames nest here (a job runs its children, or stolen work, inside its sync); how deep
        is bounded by the compute thread's recursion limit (``engine.recursion_limit``). A
        RecursionError becomes the failure of the job that met it (``_failed``), never a lost
        job: the frames below go on.
        """
        jobs = self.jobs
        while True:
            while frame.pending:
                if self.attention:
                    self.drain()
                    if frame.run.aborted:
                        raise RunAborted(frame.run.run_id)  # over here: nobody needs this frame
                    if self.cut and (root := root_of(frame)) in self.cut:
                        raise SubtreeAborted(root)
                    if frame in self.ready and frame is not self.handler_frame:
                        self._run_inlets(frame)
                    continue
                try:
                    job = jobs.pop()
                except IndexError:
                    # Every child left is out on another peer: help until their results are in.
                    self._wait()
                    continue
                # A job of another run (a root queued meanwhile, work taken back from a dead
                # thief): started on top of this frame, it would hold the frame until it
                # ended. It stays queued, for a thief or for when this frame is done; this
                # frame runs its own run's newest job, which may lie beneath it. Not so a job
                # its run's master placed on this peer (an SPMD entity job, an iterative task:
                # ``is_placed``): no thief may take it, and this frame may be waiting, through
                # other peers, for that very run — two SPMD roots on two peers, each waiting
                # for its entities on the other, never ended (issue 28). It runs on top of
                # this frame, which it holds for one step or one task. Nor a root that has
                # waited for a thief (every peer busy with other runs): ``root_due``.
                if (
                    job.run is not frame.run
                    and job.run.run_id != frame.run.run_id
                    and not is_placed(job)
                ):
                    if not root_due(job, self.wall_clock, self.cfg.nest_roots_after_s):
                        jobs.append(job)
                        own = self.queue.pop_of(frame.run.run_id)
                        if own is None:
                            self._wait()
                            continue
                        job = own
                elif jobs and (due := self._due_root()) is not None:
                    jobs.append(job)  # it goes before this frame's next job
                    job = due
                try:
                    self.run_job(job)
                except RunAborted as aborted:
                    if aborted.run_id == frame.run.run_id:
                        raise
                    # A job of another run that is over unwound up to this frame's sync (a frame
                    # starts only its own run's jobs, so only by a path not foreseen): it is
                    # dropped, this frame goes on.
                except (WorkerStopped, SubtreeAborted):
                    raise
                except Exception as exc:
                    # Engine code failed on ``job``: a RecursionError at the very bottom of the
                    # stack (or a bug). The job must not be lost, or ``frame`` (or whoever waits
                    # for it) would wait forever: it fails, and this frame goes on. Attribute
                    # operations and C builtins only, down to the end: a Python call here could
                    # meet the recursion limit again and lose the job after all.
                    self.current = frame
                    if job.value is UNSET and getattr(job, "exc", None) is None:
                        job.exc = exc
                    parent = job.parent
                    if parent is not None:
                        if not hasattr(job, "sib"):  # not linked yet: it finishes now
                            parent.pending -= 1
                            job.sib = parent.kids
                            parent.kids = job
                    elif job in self.under:
                        # Reported from a shallower point (``_wait``, or the top level).
                        self.failed.append(job)
                        self.attention = True
            if not self.ready or not self._inlets_after(frame):
                break
        if frame.nspawn > self.keep_synced:
            # Every child is finished and synced: past the limit they are not kept.
            frame.kids = None
        if self._wanting:
            self._want(False)

    def _inlets_after(self, frame: Job) -> bool:
        """``frame``'s loop ended with inlets ready: run them if they are ``frame``'s (True:
        they spawned, or more became ready, so the loop goes on)."""
        if frame is self.handler_frame:
            # A handler's own sync(): the handlers that became ready meanwhile run after it
            # returns (``_run_inlets`` picks them up), never inside it.
            return False
        if frame not in self.ready:
            # Inlets of a frame below this one on the stack: it runs them when control is
            # back in its own sync loop, which this makes look.
            self.attention = True
            return False
        self._run_inlets(frame)
        return bool(frame.pending) or frame in self.ready

    def drain(self) -> None:
        """Handle every event in the mailbox without blocking."""
        self.attention = False
        mailbox = self.mailbox
        while (event := mailbox.get_nowait()) is not None:
            self._handle(event)

    def _due_root(self) -> Job | None:
        """The oldest queued job, taken, if ``root_due`` (WorkerBase.queue_root put a root
        there); else None. A thief may take it, or the last job, between any two steps."""
        try:
            first = self.jobs[0]
            if root_due(first, self.wall_clock, self.cfg.nest_roots_after_s):
                self.jobs.remove(first)
                return first
        except (IndexError, ValueError):
            pass
        return None

    def _wait(self) -> None:
        """Nothing local to run: ask for work unless nested too deep, block for one event.

        Raises:
            RunAborted: the frame waits for children of a run that is over.
        """
        if self.current.run.aborted:
            raise RunAborted(self.current.run.run_id)
        if not self._wanting and self.nesting < self.cfg.max_steal_nesting:
            # A sync waits inside a job (not the idle frame): it takes only its own run's jobs.
            self._want(True, self.current.run.run_id)
        if self.failed:
            self._report_failed()
        self.attention = False
        run = self.current.run
        started = time.time()
        self._clock(None)
        event = self.mailbox.get(self.cfg.wait_poll_s)
        self._clock(run)
        if self.trace is not None and self.current is not self.idle_frame:
            self.trace.wait(run.run_id, started, time.time())  # a sync waited
        if event is None:
            return
        self._handle(event)
        self.drain()
        if self.cut:
            self.attention = True  # an Orphaned event may have been handled: look at the cut

    def _child_result(self, event: ChildResult) -> None:
        """Apply the result of a child another peer ran (at most once)."""
        value, error = event.value, event.exc
        if type(value) is Encoded:
            try:
                module = getattr(event.job.fn, "__module__", None) or ""
                value = value.decode(self.value_depth, version_of(module))
            except DecodeError as exc:
                value, error = None, exc
        job = event.job
        fresh = not job.done
        if apply_result(job, value, error) is not None:
            # No local parent: it travels on, with what its thief had applied (this peer
            # made no call for it).
            job.needs = event.needs or []
            self._report(job)
        elif self.cut and orphaned_result(job, error, self.cut):
            self._keep_orphan(job)
        elif fresh and error is not None and job.inlet is not None:
            assert job.parent is not None
            self._inlet_ready(job, job.parent, False)

    # -- inlets and abort (engine/speculation.py) ---------------------------------------------

    def _inlet_ready(self, job: Job, parent: Job, last: bool) -> None:
        """``job`` raised and has an inlet: its handler runs at its parent's sync. ``last``:
        ``job`` is the last child its parent's sync loop, which ran it, waits for; that loop
        looks for handlers as it ends, so it needs no ``attention`` (a drain of the mailbox
        at the next sync)."""
        ready = self.ready.get(parent)
        if ready is None:
            self.ready[parent] = [job]
        else:
            ready.append(job)
        if not last:
            self.attention = True

    def _run_inlets(self, frame: Job) -> None:
        """Run the handlers of ``frame``'s children that raised, oldest first, in ``frame``
        (the current frame). A handler that raises aborts ``frame``'s other children and
        its exception leaves through ``frame``'s sync; the handlers after it do not run."""
        kids = self.ready.pop(frame, None)
        while kids:
            kid = kids.pop(0)
            exc, inlet = kid.exc, kid.inlet
            assert exc is not None and inlet is not None  # only a child that raised is ready
            outer, self.handler_frame = self.handler_frame, frame
            try:
                kid.value = inlet(exc)  # type: ignore[arg-type]
            except Exception:
                self.abort_children(frame)
                self.ready.pop(frame, None)
                raise
            finally:
                self.handler_frame = outer
            # ``kid.exc`` stays: a handled job has no result of its own (see speculation.py).
            # Its traceback goes: it holds the frames the job ran in, which would otherwise
            # live as long as the spawner's frame keeps its finished children.
            exc.__traceback__ = None
            more = self.ready.pop(frame, None)
            if more:
                kids.extend(more)

    def spawn_check(self, frame: Job, pending: int) -> None:
        """A spawn's slow path: past ``max_pending``, which is -1 while a cancelled job
        runs here. Raises SubtreeAborted when ``frame`` belongs to a cancelled job (it
        unwinds at this spawn), LimitExceeded when it spawned too much; otherwise the spawn
        goes on.

        Raises:
            SubtreeAborted: ``frame`` is in a cancelled subtree.
            LimitExceeded: ``frame`` has ``engine.max_pending_jobs`` children pending.
        """
        if self.max_pending < 0:
            self.drain()  # a Cancel may wait in the mailbox
        if self.cancelling:
            root = root_of(frame)
            if self.cut.get(root) is False:
                raise SubtreeAborted(root)
        if pending > self.pending_limit:
            raise too_many(self.pending_limit)


def tune_process(cfg: EngineConfig) -> None:
    """Process-wide interpreter settings for a peer process (the compute thread shares the
    interpreter with the trio thread): GIL switch interval and young-generation GC threshold
    (see EngineConfig)."""
    sys.setswitchinterval(cfg.switch_interval_s)
    if cfg.gc_young_threshold > 0:
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(cfg.gc_young_threshold, older, oldest)


__all__ = ["CURRENT", "Mailbox", "ThreadMailbox", "Worker", "tune_process"]
