"""What a peer measures for the coordinator: how long it was idle, how long it waited on
wide-area steals, how much CPU its compute side got, and how fast its machine is.

The Satin paper's overhead of a processor is "the fraction of time it spends being idle or
communicating" (§4.5). Here a peer is idle while its compute side wants work and some run is
active: that is when it steals, so the time spent waiting for steal replies (the
communication that matters to a divide-and-conquer run) is inside it. Wide-area waiting is
counted apart, as the sum of the round trips of wide-area steal requests, for the
coordinator's per-cluster overhead. All times are on the node's clock (trio's: virtual in the
simulator), and every counter only grows; the coordinator takes differences between samples.
"""

from __future__ import annotations

import time
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
