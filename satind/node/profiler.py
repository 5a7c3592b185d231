"""The resource profiler of a real peer (mpi-ios-reconfigurable-iterative-apps §3, "every
resource has a profiling monitor"): every ``spmd.profile_s`` it reads how busy this peer's
CPUs were (``/proc/stat``, over the CPUs the process may run on) and how much of that was the
peer itself, and sets the CPU share a new thread would get here (``PeerState.spmd.cpu_share``),
which an idle peer's steal requests carry (core/spmd/).

The share is min(1, n / (others + 1)) for n CPUs of which ``others`` are kept busy by other
processes: a thread gets a whole CPU while one is free, else its fair share. The simulator
has no profiler (its peers' share stays unmeasured: no migration by gain there). Without a
/proc/stat (not Linux) the share stays unmeasured too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import trio

from satind.core.state import PeerState

STAT = "/proc/stat"


def cpu_times(cpus: set[int]) -> tuple[float, float] | None:
    """(busy, total) jiffies summed over ``cpus``; None when /proc/stat is not there."""
    try:
        with open(STAT, encoding="ascii") as f:
            lines = f.readlines()
    except OSError:
        return None
    busy = total = 0.0
    for line in lines:
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        fields = [float(x) for x in rest.split()]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
        # guest time is already in user time: the first eight fields are the whole.
        whole = sum(fields[:8])
        busy += whole - idle
        total += whole
    return (busy, total) if total > 0 else None


def share(n: int, busy_cpus: float, own_cpus: float) -> float:
    """The CPU share a new thread gets on ``n`` CPUs that others keep ``busy - own`` busy."""
    others = max(busy_cpus - own_cpus, 0.0)
    return min(1.0, n / (others + 1.0))


def machine_cpus() -> set[int]:
    """The CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return os.sched_getaffinity(0)
    return set(range(os.cpu_count() or 1))


async def profile_loop(state: PeerState, measured: Callable[[float], None]) -> None:
    """Measure, every ``spmd.profile_s``, until cancelled."""
    every = state.cfg.spmd.profile_s
    if every <= 0:
        return
    cpus = machine_cpus()
    last = cpu_times(cpus)
    if last is None:
        return
    own_last, wall_last = time.process_time(), time.monotonic()
    while True:
        await trio.sleep(every)
        # Read again each time: an operator (or a test) may pin the peer to other CPUs.
        now_cpus = machine_cpus()
        now = cpu_times(now_cpus)
        own, wall = time.process_time(), time.monotonic()
        if now is not None and now_cpus == cpus and now[1] > last[1] and wall > wall_last:
            busy_cpus = (now[0] - last[0]) / (now[1] - last[1]) * len(cpus)
            own_cpus = (own - own_last) / (wall - wall_last)
            measured(share(len(cpus), busy_cpus, own_cpus))  # to the core: CpuShareMeasured
        if now is not None:
            cpus, last, own_last, wall_last = now_cpus, now, own, wall
