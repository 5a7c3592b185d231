"""What a peer measures for the coordinator: how long its compute side computed, how long it
was idle, how long it waited on wide-area steals, how much CPU it got, and how fast its
machine is.

The Satin paper's overhead of a processor is "the fraction of time it spends being idle or
communicating" (§4.5): all the time it does not compute. The compute side charges the time it
spends running jobs (``Worker.busy_total_s``, engine/worker_base.py ``_clock``), so the
overhead is the rest of the period, whatever it went to: waiting for steal replies, blocking
in a sync for a stolen child's result, sending and receiving, the GIL taken by the network
side. Idle time (the compute side wants work while a run is active) is kept beside it for the
run's stats, and wide-area waiting (the sum of the round trips of wide-area steal requests)
for the coordinator's per-cluster overhead. All times are on the node's clock (trio's:
virtual in the simulator), and every counter only grows; the coordinator takes differences
between samples.

The speed of a machine is, as in the paper, "estimated by running a benchmark, for example
the actual application with a smaller input problem": the run's plugin's own ``benchmark``
when it has one (``Plugin.benchmark``, timed on a plugin thread each time the coordinator
asks), else a fixed Python loop (``benchmark_cpu_s``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Utilization:
    """One peer's idle and wide-area waiting time so far."""

    idle_s: float = 0.0
    wide_wait_s: float = 0.0
    idle_since: float | None = None

    def set_idle(self, idle: bool, now: float) -> None:
        """The compute side wants work (and a run is active), or no longer does."""
        if idle and self.idle_since is None:
            self.idle_since = now
        elif not idle and self.idle_since is not None:
            self.idle_s += now - self.idle_since
            self.idle_since = None

    def idle_total(self, now: float) -> float:
        """Idle time so far, the stretch in progress included."""
        ongoing = 0.0 if self.idle_since is None else now - self.idle_since
        return self.idle_s + ongoing


def benchmark_cpu_s(loops: int) -> float:
    """CPU seconds this thread takes for ``loops`` turns of a fixed Python loop: the speed of
    this machine for interpreted code, now. Thread CPU time, so that waiting for the GIL or
    for a CPU does not count (a CPU shared with another program shows in the CPU share the
    coordinator computes, not here)."""
    start = time.thread_time()
    total = 0
    for i in range(loops):
        total += i * i & 7
    return max(time.thread_time() - start, 1e-9)


def timed_cpu_s(work: Callable[[], object]) -> float:
    """CPU seconds this thread takes to run ``work`` (a plugin's benchmark), as
    ``benchmark_cpu_s`` times its loop: thread CPU time, waiting for the GIL not counted."""
    start = time.thread_time()
    work()
    return max(time.thread_time() - start, 1e-9)


class AppBenchmarks:
    """The timings of runs' plugins' own benchmarks on one peer, by plugin and code: the
    paper's benchmark "executed periodically". Each time the coordinator asks, a peer answers
    with the last timing and starts the next (one at a time per plugin), so the first answer
    for a plugin is 0 (not timed yet) and the coordinator uses the fixed loop that period."""

    def __init__(self) -> None:
        self.cpu_s: dict[str, float] = {}
        self._timing: set[str] = set()

    def start(self, key: str) -> bool:
        """Whether to time ``key``'s benchmark now (False: a timing is under way)."""
        if key in self._timing:
            return False
        self._timing.add(key)
        return True

    def done(self, key: str, cpu_s: float | None) -> None:
        """A timing ended: its CPU seconds, or None when the benchmark failed (forgotten:
        the fixed loop stands in)."""
        self._timing.discard(key)
        if cpu_s is None:
            self.cpu_s.pop(key, None)
        else:
            self.cpu_s[key] = cpu_s
