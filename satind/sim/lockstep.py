"""The simulator's compute driver: the real compute side, in lockstep with virtual time.

A simulated peer computes with the very ``engine.worker.Worker`` a real peer runs — the same
spawn, sync, steal-while-waiting, abort and mailbox code — on a thread of its own. What
differs is how that thread takes turns: it runs only while the simulator's trio thread waits
for it, and hands the turn back whenever it blocks (its mailbox is empty, or a synthetic leaf
spends virtual time). So exactly one thread runs at any moment, every hand-over happens at the
same point of the same trio schedule, and a scenario with a seed gives one history, however
many peers it has.

* ``_step`` gives the compute thread the turn and waits for it to block again; the hook calls
  it made meanwhile (``soon``) then run on the trio thread, in order, as the real peer's
  ``run_sync_soon`` calls would.
* A leaf of the synthetic tree (``sim/workload.py``) calls ``spend(seconds)``: the thread
  blocks, the driver sleeps that long on trio's clock, then steps the thread again.
* A post to a thread blocked on its mailbox wakes the driver, which steps it.
* ``freeze``/``thaw``: a paused peer (the "pause" fault) takes no turns.
* ``speed`` (the machine's hardware speed, from the scenario's ``[peers] speeds``) and
  ``share`` (the fraction of a CPU the peer gets, lowered by the "load" fault): a leaf of cost
  ``c`` takes ``c / (speed * share)`` virtual seconds, and ``cpu_seconds`` grows by that times
  ``share`` (``c / speed``: background load costs wall time, not CPU time). Both are read when
  a leaf starts; a change takes effect from the next leaf (leaves last milliseconds).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import trio

from satind.config import EngineConfig
from satind.engine import worker as worker_mod
from satind.engine.frames import MailboxEvent, WorkerHooks, WorkerStopped
from satind.engine.worker import Worker
from satind.work.jobs import Job

T = TypeVar("T")

# The driver whose compute thread has the turn now (only one has it at any moment).
_TURN: LockstepCompute | None = None

LeafRecorder = Callable[[str, tuple[int, ...], float], None]
Blocked = Literal["start", "mailbox", "sleep", "done", "running"]

# Bytes of stack for each simulated compute thread (a real peer's is 256 MiB; a simulation
# runs hundreds, and Python-to-Python calls take little C stack).
STACK_BYTES = 8 * 1024 * 1024

# The reference work ``benchmark_cpu_s`` times, in CPU seconds on a machine of speed 1.0. Small,
# as a real peer's benchmark must be (it runs while the peer works), and it costs no virtual
# time here.
BENCHMARK_WORK_S = 0.01


def spend(seconds: float, path: tuple[int, ...] | None) -> None:
    """A synthetic leaf's work: ``seconds`` of virtual time, when run by the simulator
    (elsewhere it costs nothing). ``path`` None: work that is not a leaf's (not counted as
    one)."""
    driver = _TURN
    if driver is not None:
        driver.leaf(seconds, path)


class _Mailbox:
    """The compute thread's mailbox: a list (only one thread runs at a time) whose empty
    ``get`` hands the turn back."""

    def __init__(self, driver: LockstepCompute) -> None:
        self.driver = driver
        self.events: list[MailboxEvent] = []

    def put(self, event: MailboxEvent) -> None:
        self.events.append(event)
        self.driver.wake()

    def get_nowait(self) -> MailboxEvent | None:
        return self.events.pop(0) if self.events else None

    def get(self, timeout: float) -> MailboxEvent | None:
        # No timeout in virtual time: the compute side waits until something is posted, as
        # the real one would, minus its polling (which only guards against lost wakeups).
        if not self.events:
            self.driver.block("mailbox")
        return self.get_nowait()


class LockstepCompute:
    def __init__(
        self,
        cfg: EngineConfig,
        hooks: WorkerHooks,
        on_leaf: LeafRecorder,
        *,
        max_frame: int,
        value_depth: int,
    ) -> None:
        self.worker = Worker(
            cfg, hooks, mailbox=_Mailbox(self), max_frame=max_frame, value_depth=value_depth
        )
        # Jobs that measure their own cost (SPMD steps) read virtual time: plugin code costs
        # none here, and a real clock would make every replay of a seed differ.
        self.worker.wall_clock = self._virtual_now
        self.worker.cpu_clock = self.cpu_seconds
        self.on_leaf = on_leaf
        # Virtual seconds spent in leaves (wall time of the compute side, not CPU time).
        self.busy_s = 0.0
        # Hardware speed relative to the reference machine, and the fraction of a CPU this
        # peer gets (1.0: no background load). Set by the simulator; read at each leaf's start.
        self.speed = 1.0
        self.share = 1.0
        self._cpu_s = 0.0
        # The turn passes through two locks held "taken": releasing one lets the thread
        # waiting in acquire go on. The hand-overs strictly alternate, so a plain lock does
        # what a Semaphore(0) would, without its Python-level Condition (a thread switch in
        # C instead of several Python calls, twice per turn).
        self._to_compute = threading.Lock()
        self._to_compute.acquire()
        self._to_trio = threading.Lock()
        self._to_trio.acquire()
        self._blocked: Blocked = "start"
        self._wake_at = 0.0
        self._now = 0.0
        self._stopping = False
        self._calls: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self._kick = trio.Event()
        self._thawed: trio.Event | None = None

    # -- the node's side (trio thread) ----------------------------------------------------------

    def post(self, event: MailboxEvent) -> None:
        self.worker.post(event)

    def queue_root(self, job: Job) -> None:
        self.worker.queue_root(job)

    def soon(self, fn: Callable[..., Any], *args: Any) -> None:
        self._calls.append((fn, args))

    def stop(self) -> None:
        self._stopping = True
        self.wake()

    async def offload(self, fn: Callable[..., T], *args: Any) -> T:
        """In virtual time, plugin code costs nothing: run it here (a thread would let the
        mock clock jump while it ran, and the schedule would depend on wall time)."""
        await trio.lowlevel.checkpoint()
        return fn(*args)

    async def run_plugin(
        self, fn: Callable[..., T], *args: Any, limiter: trio.CapacityLimiter | None = None
    ) -> T:
        """As ``offload``: in virtual time a parse is instant, so nothing waits for a slot."""
        return await self.offload(fn, *args)

    def wake(self) -> None:
        if self._blocked == "mailbox":
            self._kick.set()

    def freeze(self) -> None:
        if self._thawed is None:
            self._thawed = trio.Event()

    def thaw(self) -> None:
        if self._thawed is not None:
            self._thawed.set()
            self._thawed = None

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        previous = threading.stack_size()
        threading.stack_size(STACK_BYTES)
        try:
            thread = threading.Thread(target=self._thread, name="sim-compute", daemon=True)
            thread.start()
        finally:
            threading.stack_size(previous)
        task_status.started()
        try:
            self._step()
            while self._blocked != "done":
                if self._blocked == "sleep":
                    await trio.sleep_until(self._wake_at)
                else:
                    self._kick = trio.Event()
                    if not self.worker.mailbox.events and not self._stopping:  # type: ignore[attr-defined]
                        await self._kick.wait()
                while self._thawed is not None:
                    await self._thawed.wait()
                self._step()
        finally:
            # Stopped, or cancelled (a crash): unwind the thread, and run nothing it asked for.
            self._stopping = True
            while self._blocked != "done":
                self._step(run_calls=False)
            thread.join()

    def _step(self, run_calls: bool = True) -> None:
        """Give the compute thread the turn until it blocks again."""
        global _TURN
        self._now = trio.current_time()
        worker_mod.CURRENT = self.worker
        _TURN = self
        self._blocked = "running"
        self._to_compute.release()
        self._to_trio.acquire()
        _TURN = None
        worker_mod.CURRENT = None
        calls, self._calls = self._calls, []
        if run_calls:
            for fn, args in calls:
                fn(*args)

    # -- the compute thread's side ----------------------------------------------------------

    def _thread(self) -> None:
        self._to_compute.acquire()
        try:
            if not self._stopping:
                self.worker.run_forever()
        finally:
            self._blocked = "done"
            self._to_trio.release()

    def block(self, why: Blocked, wake_at: float = 0.0) -> None:
        """Hand the turn back and wait for the next one (on the compute thread)."""
        self._blocked = why
        self._wake_at = wake_at
        self._to_trio.release()
        self._to_compute.acquire()
        if self._stopping:
            raise WorkerStopped

    def leaf(self, seconds: float, path: tuple[int, ...] | None) -> None:
        """A synthetic leaf of cost ``seconds`` (on the reference machine, alone on its CPU)
        spends ``seconds / (speed * share)`` of virtual time (on the compute thread).

        The recorded cost stays ``seconds``: the simulation's work and redone work are in
        reference seconds, whoever ran the leaf.
        """
        run_id = self.worker.current.run.run_id
        share = self.share
        # x / 1.0 == x exactly: with speed and share 1.0 every wake time is what it was.
        duration = seconds / (self.speed * share)
        self.block("sleep", self._now + duration)
        # Done (a crash while it slept raised instead): recorded on the trio thread.
        self.busy_s += duration
        self._cpu_s += duration * share
        if path is not None:
            self.soon(self.on_leaf, run_id, path, seconds)

    # -- resource accounting (either thread; only one runs at a time) -------------------------

    def _virtual_now(self) -> float:
        """Virtual time as of the compute thread's current turn (it advances only while the
        thread is blocked: in a leaf, or waiting for its mailbox)."""
        return self._now

    def cpu_seconds(self) -> float:
        """CPU seconds the compute side has used so far, in virtual time: each finished leaf's
        virtual duration times the share in force (the simulated ``time.process_time()``)."""
        return self._cpu_s

    def busy_seconds(self) -> float:
        """Virtual seconds the compute side spent computing jobs (the worker's own account,
        as on a real peer)."""
        return self.worker.busy_seconds()

    async def time_benchmark(self, work: Callable[[], object]) -> float:
        """A plugin's benchmark, as the reference work: the simulated machine's speed, not
        the host's (the plugin's code does not run), and no virtual time."""
        await trio.lowlevel.checkpoint()
        return self.benchmark_cpu_s()

    def benchmark_cpu_s(self, loops: int = 0) -> float:
        """CPU seconds the reference work (``BENCHMARK_WORK_S``) takes on this peer now.

        CPU time, so background load (``share``) does not change it; it costs no virtual time.
        ``loops``, the size of a real peer's benchmark (``ComputeDriver``), is ignored: what
        a benchmark tells is the ratio between peers, the same for any size.
        """
        return BENCHMARK_WORK_S / self.speed
