"""What the compute side holds, and what it does off the spawn/sync hot path.

``WorkerBase`` is the state of a peer's compute side (the work queue, the mailbox, the frames
being cut, the inlets ready, the replicas, held results and parked jobs, what is reported)
and the operations that are not on the path every spawn and sync takes: what the network
side calls (post, stop, a root, reclaim), the mailbox's events, cancelling stolen jobs whose
victim aborted them, shared objects' guards and held results, and values leaving the compute
side (results, orphans, checkpoint records, failures). ``engine/worker.py``'s ``Worker``
extends it with the hot path. Both modules are compiled together (setup.py ``HOT``), so a
call between them is a native call.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from satind.config import EngineConfig
from satind.engine.frames import (
    Cancel,
    ChildResult,
    DigestArrived,
    DigestWanted,
    ForgetRun,
    JobArrived,
    MailboxEvent,
    Orphaned,
    ReplicaArrived,
    ReplicaWanted,
    ResultDue,
    Snapshot,
    Stop,
    UpdatesArrived,
    Wakeup,
    WorkerHooks,
    WorkerStopped,
    finish,
    idle_frame,
    linked,
    snapshot,
    too_deep,
)
from satind.engine.replica_table import ReplicaTable
from satind.engine.replicas import Replica
from satind.engine.speculation import drop_children, is_aborted
from satind.engine.unwind import cut_subtree, in_cut
from satind.net.codec import Encoded, EncodeError, encode_value
from satind.work.errors import aborted
from satind.work.events import EntityInput
from satind.work.jobs import UNSET, Job, RunState
from satind.work.reports import (
    ChildrenAborted,
    GuardWaiting,
    JobFinished,
    JobLogged,
    OrphanResult,
    ResultWaiting,
    SnapshotTaken,
    SubtreeDropped,
    WantWork,
)
from satind.work.workqueue import WorkQueue

if TYPE_CHECKING:
    from satind.trace import Traces


class ThreadMailbox:
    """The real peer's mailbox: a thread-safe queue the compute thread blocks on."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[MailboxEvent] = queue.SimpleQueue()

    def put(self, event: MailboxEvent) -> None:
        self._queue.put(event)

    def get_nowait(self) -> MailboxEvent | None:
        if self._queue.empty():
            return None  # the common case, without raising and catching queue.Empty
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            return None

    def get(self, timeout: float) -> MailboxEvent | None:
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None


class Mailbox(Protocol):
    """Where the network side's events wait for the compute side."""

    def put(self, event: MailboxEvent) -> None: ...

    def get_nowait(self) -> MailboxEvent | None: ...

    def get(self, timeout: float) -> MailboxEvent | None:
        """Block for the next event; None if none came within ``timeout``."""
        ...


# Guards of spawnable functions (``Spawnable.guard``), by the plain function a Job holds.
GUARDS: dict[Callable[..., Any], Callable[..., bool]] = {}


class WorkerBase:
    """The compute side's state and its operations off the hot path (see the module)."""

    def __init__(
        self,
        cfg: EngineConfig,
        hooks: WorkerHooks,
        *,
        mailbox: Mailbox | None = None,
        max_frame: int = 64 * 1024 * 1024,
        value_depth: int = 200,
    ) -> None:
        self.cfg = cfg
        self.hooks = hooks
        self.queue = WorkQueue()
        # The queue's deque itself, bound once for the spawn and sync hot paths.
        self.jobs = self.queue.jobs
        self.mailbox: Mailbox = mailbox if mailbox is not None else ThreadMailbox()
        # What values that travel may be (net.max_frame_bytes, net.max_depth).
        self.max_frame = max_frame
        self.value_depth = value_depth
        # Set by the network side after it posts to the mailbox; read at every sync.
        self.attention = False
        # The frame of the job running now; outside any job, a sentinel without children.
        self.idle_frame = idle_frame()
        self.current: Job = self.idle_frame
        # Stolen or root jobs on the stack right now (bounded by cfg.max_steal_nesting).
        self.nesting = 0
        # Jobs one job may spawn before it syncs (cfg.max_pending_jobs); ``max_pending`` is
        # what a spawn compares with (see ``cancelling``).
        self.pending_limit = cfg.max_pending_jobs
        self.max_pending = self.pending_limit
        # Whose time the compute side spends now, and since when (``_clock``): the run of
        # the job without a local parent it runs (a root or a stolen job), or None while it
        # blocks waiting for an event.
        self.clock_run: RunState | None = None
        self.clock_t = 0.0
        # All of it charged to runs, ever: self-adaptivity's overhead is the rest (a float
        # the trio thread only reads: ``busy_seconds``).
        self.busy_total_s = 0.0
        # A frame that spawned more than this drops its children at the end of each sync
        # (cfg.keep_synced_children).
        self.keep_synced = cfg.keep_synced_children
        # Roots of subtrees being unwound, their frames aborted at their next sync: orphan
        # subtrees (Orphaned: True, their finished results are kept) and stolen jobs whose
        # victim aborted them (Cancel: False, nothing is kept).
        self.cut: dict[Job, bool] = {}
        # Cancelled roots still running here. While there are any (or a Cancel is posted),
        # ``max_pending`` is -1, so that every spawn takes its slow path and checks whether
        # it must unwind (``spawn_check``): a spawn pays nothing for this the rest of the
        # time.
        self.cancelling = 0
        # Frames with children whose inlet waits to run, in the order they finished
        # (engine/speculation.py); and the frame whose handler runs now, the innermost if
        # handlers nest (a handler that syncs does not run its frame's other handlers inside
        # it; the frames of jobs that run inside that sync run theirs as usual). A sync loop
        # only ever runs for the innermost frame, so the innermost handler's is the only
        # one to compare with.
        self.ready: dict[Job, list[Job]] = {}
        self.handler_frame: Job | None = None
        # Shared objects (satind/shared.py): this peer's replicas and what keeps them in step
        # (engine/replica_table.py); ``shared`` is its replicas by id (the network side reads
        # which ones exist).
        self.replicas = ReplicaTable(hooks, max_frame, value_depth)
        self.shared: dict[str, Replica] = self.replicas.objects
        # Results of children other peers ran that came before the global calls their thief
        # had applied (``ChildResult.needs``): each is applied to its parent once our
        # replicas have seen those calls, so that a frame reads, after its sync, every call
        # its children's subtrees made (or when the network side says ``ResultDue``).
        self.held: list[ChildResult] = []
        # What each SPMD entity job here reads (its state, its ghosts), as it arrived with the
        # job (``JobArrived.entity``); taken by the job when it runs (satind/spmd.py).
        self.entity_inputs: dict[Job, EntityInput] = {}
        # What a job measures its own cost with (SPMD steps: satind/spmd.py): wall seconds and
        # this thread's CPU seconds. The simulator's driver gives its virtual clocks, so that
        # a step's measured cost (which travels in messages and steers migrations) is the
        # same in every replay of a seed (sim/lockstep.py).
        self.wall_clock: Callable[[], float] = time.perf_counter
        self.cpu_clock: Callable[[], float] = time.thread_time
        # Reclaimed by the machine's owner: suspended at the next safe point (``reclaim``).
        self.reclaimed = False
        self.parked: list[Job] = []
        # Jobs without a local parent that failed in engine code deep in the stack, to be
        # reported from a shallower point (sync_frame).
        self.failed: list[Job] = []
        # Report every finished job (checkpoint policy "sel", systematic event logging).
        self.log_all = False
        # Snapshots (checkpoint policy "tic"): the frame each root or stolen job on the stack
        # runs under, and each open frame's newest child already reported.
        self.under: dict[Job, Job | None] = {}
        self.reported: dict[Job, Job | None] = {}
        # The peer's traces (satind/trace.py), or None: recorded only for jobs without a
        # local parent and for blocking waits, never per spawn or sync (the hot path).
        self.trace: Traces | None = None
        self._wanting = False
        self._stopped = False

    # -- called from the network side --------------------------------------------------------

    def post(self, event: MailboxEvent) -> None:
        """Thread-safe: hand an event to the compute side."""
        self.mailbox.put(event)
        # After the put: the compute side clears the flag before draining, so an event is
        # never left behind with the flag down.
        self.attention = True
        if type(event) is Cancel:
            # A job running here may have to unwind: its next spawn looks (spawn_check), not
            # only its next sync. One store, atomic under the GIL.
            self.max_pending = -1

    def stop(self) -> None:
        """Thread-safe: make the compute side unwind at its next safe point."""
        self._stopped = True
        self.post(Stop())

    def queue_root(self, job: Job) -> None:
        """Thread-safe: a run's root, into the queue's oldest end at once, not by the mailbox
        (drained only when a long leaf ends): idle peers can steal it from the queue now."""
        job.run.queued_at = self.wall_clock()
        self.queue.give_back(job)
        self.post(Wakeup())

    def reclaim(self, reclaimed: bool) -> None:
        """Thread-safe: the machine's owner reclaimed it (True) or released it (False). The
        compute side suspends at its next safe point — before it starts a job, or at a
        ``satind.pause_point()`` in a long one — and resumes where it was."""
        self.reclaimed = reclaimed
        self.post(Wakeup())

    def suspend(self) -> None:
        """Reclaimed: compute nothing until released, still handling the mailbox (results
        and cancellations keep arriving)."""
        run = self.clock_run
        self._clock(None)
        while self.reclaimed and not self._stopped:
            event = self.mailbox.get(self.cfg.wait_poll_s)
            if event is not None:
                self._handle(event)
        self._clock(run)

    def _want(self, wanted: bool, run_id: str = "") -> None:
        self._wanting = wanted
        self.hooks.report(WantWork(wanted, run_id, self.nesting))

    def _child_result(self, event: ChildResult) -> None:
        """Apply the result of a child another peer ran: the hot path's (``Worker``)."""
        raise NotImplementedError

    def _clock(self, run: RunState | None) -> None:
        """Charge the time since the last call to the run that had the compute side
        (``RunState.busy_s``) and hand it to ``run`` (None: nobody, it blocks). Called where
        a job without a local parent starts and ends and around every blocking wait, never on
        the spawn path. Between two jobs, at the top level, the time goes to the idle
        frame's run, which is nobody's. On ``wall_clock``: virtual in the simulator."""
        now = self.wall_clock()
        owner = self.clock_run
        if owner is not None:
            owner.busy_s += now - self.clock_t
            if owner is not self.idle_frame.run:
                self.busy_total_s += now - self.clock_t
        self.clock_run = run
        self.clock_t = now

    def busy_seconds(self) -> float:
        """``busy_total_s`` with the stretch under way (a stolen job may compute for a
        minute before it is charged). From the trio thread, a ``_clock`` between the reads
        may count a stretch twice or not yet in one sample; the next one is right again."""
        since = self.clock_t
        total = self.busy_total_s
        owner = self.clock_run
        if owner is None or owner is self.idle_frame.run:
            return total
        return total + max(0.0, self.wall_clock() - since)

    def _failed(self, job: Job, exc: BaseException) -> BaseException:
        """What a job that raised failed with: its exception, or, for a recursion past the
        compute thread's limit, an error that names the limit and the likely cause."""
        if type(exc) is RecursionError:
            return too_deep(job, self.cfg.recursion_limit)
        return exc

    def _handle(self, event: MailboxEvent) -> None:
        if isinstance(event, JobArrived):
            job = event.job
            if event.restarted:
                # A new list: ``account`` reads it at every leaf of the run.
                job.run.redo = [*(job.run.redo or ()), job.path]
            if in_cut(job, self.cut) or is_aborted(job):
                return  # a restarted child of an aborted subtree or frame: nobody waits for it
            # Work is here (stolen for us, or taken back): stop asking. The thief stops by
            # itself when it delivers, but a late steal reply does not go through it.
            if self._wanting:
                self._want(False)
            if event.entity is not None:
                self.entity_inputs[job] = event.entity
            self.jobs.append(job)
        elif isinstance(event, ChildResult):
            if is_aborted(event.job):
                return  # a child its parent aborted (or a duplicate of one finished before)
            if event.needs and event.job.parent is not None and not self.replicas.seen(event.needs):
                self.held.append(event)  # the calls its subtree made are not all here yet
                self.hooks.report(ResultWaiting(event.job, event.sender))
                return
            self._child_result(event)
        elif isinstance(event, ResultDue):
            for held in [h for h in self.held if h.job is event.job]:
                self.held.remove(held)
                if not held.job.run.aborted:
                    self._child_result(held)
        elif isinstance(event, Orphaned):
            cut_subtree(event.job, self.cut)
            self.attention = True
        elif isinstance(event, Cancel):
            self._cancel(event.job)
        elif isinstance(event, UpdatesArrived):
            self.replicas.apply_updates(event.updates)
            self._recheck_parked()
        elif isinstance(event, ReplicaArrived):
            self.replicas.install(event, self.parked)
            self._recheck_parked()
        elif isinstance(event, ReplicaWanted):
            self.replicas.give(event)
        elif isinstance(event, DigestWanted):
            self.replicas.send_digest(event.peer)
        elif isinstance(event, DigestArrived):
            self.replicas.answer_digest(event)
        elif isinstance(event, ForgetRun):
            self.replicas.forget_run(event.run_id)
        elif isinstance(event, Wakeup):
            # Posted, among others, when a run ends here.
            self.replicas.log.keep(self.replicas.objects)
            if self.held:
                self._recheck_held()  # results held for a run that ended go
        elif isinstance(event, Snapshot):
            self.reported = snapshot(self.current, self.under, self.reported, self._log)
            self.hooks.report(SnapshotTaken())
        elif isinstance(event, Stop):
            raise WorkerStopped

    def abort_children(self, frame: Job) -> None:
        """``abort()`` in ``frame`` (the current frame): cancel its children that have not
        finished. Queued ones are dropped here; the network side tells the thieves of the
        others (``hooks.children_aborted``); the frame stops waiting for any of them."""
        outstanding = frame.pending
        if not outstanding or not self.cfg.aborts:
            return
        frame.aborted_below = frame.nspawn
        dropped = drop_children(frame, self.jobs)
        frame.pending = 0
        run = frame.run
        run.aborts += 1
        run.jobs_cancelled += dropped
        if outstanding > dropped:
            self.hooks.report(ChildrenAborted(frame))

    def _cancel(self, job: Job) -> None:
        """Handle Cancel: a stolen job its victim aborted."""
        if job in self.under:
            if self.cut.get(job) is not False:
                self.cut[job] = False
                self.cancelling += 1
            self.attention = True
        elif self.queue.remove(job) or job in self.parked:
            if job in self.parked:
                self.parked.remove(job)
            job.exc = aborted()
            job.run.jobs_cancelled += 1
            self.hooks.report(SubtreeDropped(job))
        else:
            # It finished (its result is on the way, and is dropped there), or was dropped
            # with its run: the network side forgets it either way.
            self.hooks.report(SubtreeDropped(job))
        self.max_pending = -1 if self.cancelling else self.pending_limit

    def _cancelled(self, job: Job, seconds: float) -> None:
        """A cancelled stolen job's frames are unwound."""
        job.run.jobs_cancelled += 1
        job.run.abort_wasted_s += seconds
        if self.cut.get(job) is False:
            # Out of the cut: unlike an orphan subtree's, no child of it comes back later
            # (the network side dropped the records of what it gave out when the Abort came,
            # and hands nothing of it out since), and a long-lived peer must not keep it.
            del self.cut[job]
            self.cancelling -= 1
            if self.cancelling <= 0:
                self.cancelling = 0
                self.max_pending = self.pending_limit

    # -- shared objects (satind/shared.py; the table is engine/replica_table.py) -------------

    def share(self, obj: Replica) -> None:
        """A shared object made in the running job: its reproducible id, and our replica."""
        cur = self.current
        count = getattr(cur, "nshared", 0)
        cur.nshared = count + 1
        self.replicas.share(obj, cur.run.run_id, cur.path, count, cur.run.epoch)

    def shared_call(self, obj: Replica, method: str, args: tuple[Any, ...]) -> None:
        """A global call just applied here: number it and ship it.

        Raises:
            EncodeError: its arguments cannot travel.
        """
        self.replicas.call_made(obj, method, args)

    def _guard_ok(self, job: Job) -> bool:
        try:
            return bool(GUARDS[job.fn](*job.args))
        except Exception as exc:
            job.exc = self._failed(job, exc)
            return False

    def _recheck_held(self) -> None:
        """Replicas changed: held results whose calls are all here now are applied."""
        for held in list(self.held):
            if held.job.run.aborted or is_aborted(held.job):
                self.held.remove(held)  # nobody waits for it any more
                self.hooks.report(ResultWaiting(held.job, held.sender, False))
            elif held.needs is None or self.replicas.seen(held.needs):
                self.held.remove(held)
                self.hooks.report(ResultWaiting(held.job, held.sender, False))
                self._child_result(held)

    def _recheck_parked(self) -> None:
        """Replicas changed: parked jobs whose guard holds now go to the queue."""
        if self.held:
            self._recheck_held()
        for job in list(self.parked):
            if job.run.aborted:
                self.parked.remove(job)  # its run is over: nobody waits for it
            elif self._guard_ok(job):
                self.parked.remove(job)
                self.jobs.append(job)
                self.hooks.report(GuardWaiting(job, False))
            elif job.error is not None:
                self.parked.remove(job)
                self._report(job)

    def _engine_failed(self, job: Job, exc: Exception, frame: Job) -> None:
        """At the top level: engine code raised while running ``job`` (a bug): the job fails
        with that error instead of taking the compute side down with it."""
        self.current = frame
        if job.error is None and job.value is UNSET:
            job.exc = self._failed(job, exc)
        if job.parent is not None:
            if not linked(job):  # not linked to its parent yet: it finishes now
                finish(job, job.parent)
        elif job in self.under:
            self.failed.append(job)
        self._report_failed()

    def _report_failed(self) -> None:
        """Report the jobs without a local parent that failed in engine code deep in the
        stack (see ``sync_frame``), now that the stack is shallower."""
        while self.failed:
            job = self.failed.pop()
            if job in self.under:
                self.nesting -= 1
                del self.under[job]
                job.exc = self._failed(job, job.exc or RuntimeError("failed"))
                self._report(job)

    # -- values leaving the compute side (encoded here, not on the network side) ------------

    def _encoded(self, job: Job) -> bytes | None:
        try:
            return encode_value(job.value, self.max_frame)
        except EncodeError:
            return None

    def _report(self, job: Job) -> None:
        """A job without a local parent finished: encode its value and hand it over (a stolen
        job's with the calls its result must not overtake, ``needs``)."""
        if self.shared and getattr(job, "origin", None) is not None and not hasattr(job, "needs"):
            job.needs = self.replicas.needs(job.run.run_id)
        if job.error is None and type(job.value) is not Encoded:
            try:
                job.value = Encoded(encode_value(job.value, self.max_frame))
            except EncodeError as exc:
                job.value, job.exc = UNSET, exc
        self.hooks.report(JobFinished(job))

    def _log(self, job: Job) -> None:
        if job.error is None and not job.run.aborted and (data := self._encoded(job)):
            self.hooks.report(JobLogged(job, data))

    def _keep_orphan(self, job: Job) -> None:
        if self.shared and not hasattr(job, "needs"):
            job.needs = self.replicas.needs(job.run.run_id)
        if (data := self._encoded(job)) is not None:
            self.hooks.report(OrphanResult(job, data))
