"""The real peer's compute driver: the compute side (``engine.worker.Worker``) on a thread.

The node talks to its compute side through a driver, so that the simulator can drive the
same compute side in lockstep with virtual time instead (``sim/lockstep.py``). This one runs
``Worker.run_forever`` on a thread with a large stack, hands its hook calls to the trio thread
with ``TrioToken.run_sync_soon``, and stops it when its task is cancelled.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import trio

from satind.adaptivity.measure import benchmark_cpu_s, timed_cpu_s
from satind.engine.datastack import on_a_large_chunk
from satind.engine.frames import MailboxEvent
from satind.engine.worker import Worker
from satind.work.jobs import Job

T = TypeVar("T")


class ComputeDriver(Protocol):
    """How the node reaches its compute side."""

    worker: Worker

    def post(self, event: MailboxEvent) -> None: ...

    def queue_root(self, job: Job) -> None: ...

    def soon(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the network side soon (a hook call from the compute side)."""
        ...

    def stop(self) -> None: ...

    async def offload(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` (a long encoding, a rescan) where it cannot keep the network
        side from answering: a worker thread on a real peer."""
        ...

    async def run_plugin(
        self, fn: Callable[..., T], *args: Any, limiter: trio.CapacityLimiter | None = None
    ) -> T:
        """Run plugin code for a run (a submission's parse, a result's check and report) as
        ``offload`` does, but let it go when cancelled (a stop, a parse's time bound): a
        Python thread cannot be stopped, so a stuck one runs on, holding nothing of the
        network side's and no token of the limiter other threads wait on. ``limiter``:
        whose slots it takes (a client's parses), each held until the code returns."""
        ...

    async def serve(self, *, task_status: trio.TaskStatus[None] = ...) -> None: ...

    def cpu_seconds(self) -> float:
        """CPU time the compute side has had so far (self-adaptivity's CPU share)."""
        ...

    def busy_seconds(self) -> float:
        """Seconds the compute side has spent computing jobs so far (self-adaptivity's
        overhead is the rest)."""
        ...

    async def time_benchmark(self, work: Callable[[], object]) -> float:
        """CPU seconds a plugin's benchmark takes here now (``Plugin.benchmark``)."""
        ...

    def benchmark_cpu_s(self, loops: int) -> float:
        """CPU seconds a fixed reference work of ``loops`` turns takes here now."""
        ...


class ThreadCompute:
    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self._token: trio.lowlevel.TrioToken | None = None
        # Plugin code's threads are not drawn from trio's default limiter (40 threads, which
        # the checkpoint store's file I/O uses too): a stuck parse holds its token until it
        # returns, maybe never. What bounds them is run.parses_per_client per client, and a
        # thread per run judged.
        self._plugin_threads = trio.CapacityLimiter(math.inf)

    def post(self, event: MailboxEvent) -> None:
        self.worker.post(event)

    def queue_root(self, job: Job) -> None:
        self.worker.queue_root(job)

    def soon(self, fn: Callable[..., Any], *args: Any) -> None:
        assert self._token is not None
        with contextlib.suppress(trio.RunFinishedError):  # shutting down
            self._token.run_sync_soon(fn, *args)

    def stop(self) -> None:
        self.worker.stop()

    async def offload(self, fn: Callable[..., T], *args: Any) -> T:
        return await trio.to_thread.run_sync(fn, *args)

    async def run_plugin(
        self, fn: Callable[..., T], *args: Any, limiter: trio.CapacityLimiter | None = None
    ) -> T:
        return await trio.to_thread.run_sync(
            fn, *args, limiter=limiter or self._plugin_threads, abandon_on_cancel=True
        )

    def cpu_seconds(self) -> float:
        # The process's: the trio thread's share is small next to the compute thread's.
        return time.process_time()

    def busy_seconds(self) -> float:
        return self.worker.busy_seconds()

    async def time_benchmark(self, work: Callable[[], object]) -> float:
        return await self.run_plugin(timed_cpu_s, work)

    def benchmark_cpu_s(self, loops: int) -> float:
        return benchmark_cpu_s(loops)

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the compute thread while this task runs; stop it when the task is cancelled."""
        self._token = trio.lowlevel.current_trio_token()
        previous = threading.stack_size()
        threading.stack_size(self.worker.cfg.thread_stack_bytes)
        try:
            thread = threading.Thread(
                target=on_a_large_chunk,
                args=(self.worker.run_forever, self.worker.cfg.data_stack_bytes // 8),
                name="satind-compute",
                daemon=True,
            )
            thread.start()
        finally:
            threading.stack_size(previous)
        task_status.started()
        try:
            await trio.sleep_forever()
        finally:
            self.worker.stop()
            # A job deep in a long leaf reaches no safe point; the thread is a daemon, so the
            # process can still exit. The join is short and happens once, at shutdown.
            thread.join(timeout=self.worker.cfg.stop_join_s)
