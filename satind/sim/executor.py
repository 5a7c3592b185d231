"""The simulator's compute side: synthetic tree jobs that cost virtual time.

``SimWorker`` stands where a peer's thread-backed ``Worker`` stands and keeps its contract: the
same ``WorkQueue`` (owner at the head, thieves at the tail), the same mailbox events, the same
hooks (``want_work``, ``job_finished``), the same spawn/sync order (children pushed in spawn
order and run newest first; a sync with children out helps, then waits for work by stealing),
and the same bookkeeping (``account``, ``apply_result``). What differs is only what a job does:
instead of calling plugin code it reads the synthetic job's arguments (workload.py) and sleeps
the leaf's cost on trio's clock, so hundreds of peers share one thread in virtual time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import trio

from satind.config import EngineConfig
from satind.engine.jobs import Job
from satind.engine.worker import (
    ChildResult,
    JobArrived,
    MailboxEvent,
    Orphaned,
    RunAborted,
    Snapshot,
    Stop,
    SubtreeAborted,
    WorkerHooks,
    WorkerStopped,
    abandon,
    account,
    adopt,
    apply_result,
    cut_subtree,
    finish,
    orphaned_result,
    root_of,
    snapshot,
)
from satind.engine.workqueue import WorkQueue
from satind.sim.workload import MASK, children, leaf_cost_s, leaf_value

LeafRecorder = Callable[[str, tuple[int, ...], float], None]


class SimWorker:
    def __init__(self, cfg: EngineConfig, hooks: WorkerHooks, on_leaf: LeafRecorder) -> None:
        self.cfg = cfg
        self.hooks = hooks
        self.on_leaf = on_leaf
        self.queue = WorkQueue()
        self._mailbox: deque[MailboxEvent] = deque()
        self._wake = trio.Event()
        self.nesting = 0
        self.cut: set[Job] = set()
        self.log_all = False
        # As the thread-backed Worker's, for snapshots (checkpoint policy "tic").
        self.current: Job | None = None
        self.under: dict[Job, Job | None] = {}
        self.reported: dict[Job, Job | None] = {}
        self._wanting = False
        self._stopped = False
        self.busy_s = 0.0
        # Set while the peer is paused (the simulator's "pause" fault, SIGSTOP): the compute
        # side makes no progress either; it stops at its next job boundary.
        self._thawed: trio.Event | None = None

    # -- the peer's side ---------------------------------------------------------------------

    def post(self, event: MailboxEvent) -> None:
        self._mailbox.append(event)
        self._wake.set()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()

    def freeze(self) -> None:
        if self._thawed is None:
            self._thawed = trio.Event()

    def thaw(self) -> None:
        if self._thawed is not None:
            self._thawed.set()
            self._thawed = None

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        try:
            while not self._stopped:
                job = self.queue.pop()
                if job is None:
                    await self._wait()
                else:
                    if self._wanting:  # as the thread-backed Worker
                        self._wanting = False
                        self.hooks.want_work(False)
                    await self.run_job(job, None)
        except WorkerStopped:
            pass  # as the thread-backed worker: every frame unwinds, nothing is reported

    # -- running jobs --------------------------------------------------------------------------

    async def run_job(self, job: Job, caller: Job | None) -> None:
        parent = job.parent
        if parent is None:
            if job.run.aborted or job in self.cut:
                return
            self.nesting += 1
        elif job.run.orphans is not None and adopt(job, self.hooks):
            return  # a tuple came in while it waited in the queue: its result is kept
        if parent is None:
            self.under[job] = caller
        self.current = job
        try:
            await self._body(job)
        except RunAborted as aborted:
            if parent is None:
                del self.under[job]
            if parent is not None or aborted.run_id != job.run.run_id:
                raise
            self.nesting -= 1
            return
        except SubtreeAborted:
            abandon(job, self.queue.jobs, self.hooks)
            if parent is not None and parent is caller:
                raise  # unwind the parent's frame too
            # The subtree's root; or a child that ran under another frame (restarted work
            # runs wherever the queue gives it): its parent's frame will see the cut itself.
            if parent is None:
                self.nesting -= 1
                del self.under[job]
            return
        finally:
            self.current = caller
        account(job)
        if self.log_all:
            self.hooks.job_logged(job)
        if parent is not None:
            finish(job, parent)
        else:
            self.nesting -= 1
            del self.under[job]
            self.hooks.job_finished(job)

    async def _body(self, job: Job) -> None:
        if self._thawed is not None:
            await self._thawed.wait()
        path, depth, spec = job.args
        kids = children(path, depth, spec)
        if not kids:
            cost = leaf_cost_s(path, spec[1], spec[2])
            await trio.sleep(cost)
            if self._thawed is not None:
                await self._thawed.wait()
            self.busy_s += cost
            self.on_leaf(job.run.run_id, path, cost)
            job.value = leaf_value(path)
        else:
            handles = []
            for index, (child_path, child_depth) in enumerate(kids):
                child = Job(
                    job.fn,
                    (child_path, child_depth, spec),
                    job,
                    index,
                    job.run,
                    job.share * job.run.inv_branching,
                )
                job.nspawn += 1
                job.pending += 1
                handles.append(child)
                if job.run.orphans is not None and adopt(child, self.hooks):
                    continue  # an orphan's kept result stands in for it
                self.queue.push(child)
            job.nsync += 1
            await self.sync_frame(job)
            job.value = sum(h.result() for h in handles) & MASK

    async def sync_frame(self, frame: Job) -> None:
        while frame.pending:
            if self.cut and (root := root_of(frame)) in self.cut:
                raise SubtreeAborted(root)
            if self._mailbox:
                self._drain()
                continue
            job = self.queue.pop()
            if job is None:
                if frame.run.aborted:
                    raise RunAborted(frame.run.run_id)
                await self._wait()
                continue
            try:
                await self.run_job(job, frame)
            except RunAborted as aborted:
                if aborted.run_id == frame.run.run_id:
                    raise
                # As the thread-backed Worker: a job of another run that is over is dropped.
        if self._wanting:
            self._wanting = False
            self.hooks.want_work(False)

    async def _wait(self) -> None:
        if not self._wanting and self.nesting < self.cfg.max_steal_nesting:
            self._wanting = True
            # As the thread-backed Worker: a sync inside a job takes only its run's jobs.
            self.hooks.want_work(True, self.current.run.run_id if self.current else "")
        while not self._mailbox and not self._stopped:
            self._wake = trio.Event()
            await self._wake.wait()
        if self._stopped:
            raise WorkerStopped
        self._drain()

    def _drain(self) -> None:
        while self._mailbox:
            event = self._mailbox.popleft()
            if isinstance(event, JobArrived):
                if self.cut and root_of(event.job) in self.cut:
                    continue  # a restarted child of an aborted orphan subtree
                if self._wanting:
                    self._wanting = False
                    self.hooks.want_work(False)
                self.queue.push(event.job)
            elif isinstance(event, ChildResult):
                unparented = apply_result(event)
                if unparented is not None:
                    self.hooks.job_finished(unparented)
                elif self.cut:
                    orphaned_result(event, self.cut, self.hooks)
            elif isinstance(event, Orphaned):
                cut_subtree(event.job, self.cut)
            elif isinstance(event, Snapshot):
                self.reported = snapshot(self.current, self.under, self.reported, self.hooks)
            elif isinstance(event, Stop):
                self._stopped = True
