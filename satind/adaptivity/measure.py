"""What a peer measures for the coordinator: how long its compute side computed, how long it
was idle, how long it waited on wide-area steals (utilization.py: the core keeps these, on the
times its events carry), how much CPU it got, and how fast its machine is (here: timed on the
thread's CPU clock, which is why the core never imports this module).

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
