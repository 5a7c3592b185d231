"""What makes a simulation reproducible, and fast: virtual time, a seeded scheduler, fewer
garbage collections.

Determinism: trio runs on a virtual clock that jumps to the next deadline whenever every task is
blocked, and its scheduler is put in its deterministic mode with a seeded RNG (the switch trio
provides for Hypothesis); all randomness in satind comes from seeded ``random.Random``s. So a
scenario and a seed give one event history (``sim/state.py`` hashes it).
"""

from __future__ import annotations

import contextlib
import gc
import math
from collections.abc import Iterator
from typing import Any

import trio

# Thresholds of CPython's cyclic garbage collector while a simulation runs. A simulation holds
# hundreds of thousands of long-lived objects (a thousand peers' member tables, tasks, queued
# jobs) and makes millions of short-lived ones (messages, cancel scopes). With the default
# (700, 10, 10) the survivors of young collections trigger a full collection every few hundred
# thousand objects: 49 of them, 24 of the 93 wall seconds of steady-1000.toml. Larger young
# generations let most short-lived objects die before they are examined, and almost nothing
# reaches the old generation. Cyclic garbage is still collected; nothing the simulation
# computes depends on when (the trace hash is the same).
SIM_GC_THRESHOLDS = (20_000, 20, 100)


class JumpingClock(trio.abc.Clock):
    """Virtual time that jumps to the next deadline whenever every task is blocked.

    What ``trio.testing.MockClock(autojump_threshold=0)`` does, in one pass of trio's loop
    instead of two: trio asks a clock how long to sleep only when no task can run, and this
    one then moves to that deadline at once (MockClock waits for an empty I/O poll first and
    jumps after it, and reads the real clock on every ``current_time``). Nothing in a
    simulation waits for real time or I/O, nor uses ``wait_all_tasks_blocked``.
    """

    def __init__(self) -> None:
        self._now = 0.0

    def start_clock(self) -> None:
        pass

    def current_time(self) -> float:
        return self._now

    def deadline_to_sleep_time(self, deadline: float) -> float:
        if deadline == math.inf:
            return 999_999_999.0  # nothing to wait for: a deadlock, as under MockClock
        self._now = max(self._now, deadline)
        return 0.0


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Run with ``SIM_GC_THRESHOLDS``; the previous thresholds come back afterwards."""
    previous = gc.get_threshold()
    gc.set_threshold(*SIM_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*previous)


@contextlib.contextmanager
def deterministic_trio(seed: int) -> Iterator[None]:
    """Put trio's scheduler in its deterministic mode (the one it offers Hypothesis), seeded.

    This is the one place satind touches trio internals; if trio moves them, the simulator
    still runs but is no longer reproducible, and the reproducibility test says so.
    """
    core: Any = trio._core._run
    previous = core._ALLOW_DETERMINISTIC_SCHEDULING
    state = core._r.getstate()
    core._ALLOW_DETERMINISTIC_SCHEDULING = True
    core._r.seed(seed)
    try:
        yield
    finally:
        core._ALLOW_DETERMINISTIC_SCHEDULING = previous
        core._r.setstate(state)
