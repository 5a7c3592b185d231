"""What a peer answers its self-adaptivity coordinator (node/adapt.py ``measure``): the time
its compute side computed, and the timing of the run's plugin's own benchmark, taken in the
background (issue 34, point 2)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
import trio

from satind.adaptivity.measure import AppBenchmarks, timed_cpu_s
from satind.config import Config
from satind.core.state import PeerState
from satind.node.adapt import measure
from tests.core.support import FIB, info, known_run, make_state


@dataclasses.dataclass
class _Compute:
    busy: float = 12.5

    def cpu_seconds(self) -> float:
        return 3.0

    def benchmark_cpu_s(self, loops: int) -> float:
        return 0.004

    def busy_seconds(self) -> float:
        return self.busy

    async def time_benchmark(self, work: Callable[[], object]) -> float:
        return await trio.to_thread.run_sync(timed_cpu_s, work)


@dataclasses.dataclass
class _Host:
    """What ``measure`` reads of a peer."""

    state: PeerState
    nursery: trio.Nursery
    compute: _Compute = dataclasses.field(default_factory=_Compute)
    benchmarks: AppBenchmarks = dataclasses.field(default_factory=AppBenchmarks)
    cfg: Config = dataclasses.field(default_factory=Config)

    def now(self) -> float:
        return 40.0

    def spawn_task(self, fn: Any, *args: Any) -> None:
        self.nursery.start_soon(fn, *args)


def _with_benchmark(state: PeerState, work: Callable[[], object]) -> None:
    """Give the state's fib plugin a benchmark (the shipped one has one already)."""
    fib = dataclasses.replace(FIB, benchmark=work)
    object.__setattr__(fib, "code_hash", FIB.code_hash)
    state.plugins["fib"] = fib


async def test_the_answer_has_the_compute_time_and_the_plugins_benchmark_once_timed() -> None:
    state = make_state()
    known_run(state, info())
    calls = []
    _with_benchmark(state, lambda: calls.append(sum(range(20_000))))
    async with trio.open_nursery() as nursery:
        host = _Host(state, nursery)
        first = measure(host, "r1")  # type: ignore[arg-type]
        assert first.busy_s == 12.5 and first.bench_cpu_s == 0.004
        assert first.app_bench_cpu_s == 0.0  # not timed yet: timing now, in the background
    assert len(calls) == 1
    async with trio.open_nursery() as nursery:
        host.nursery = nursery
        second = measure(host, "r1")  # type: ignore[arg-type]
        assert second.app_bench_cpu_s > 0  # the first timing; the next one starts
    assert len(calls) == 2
    # A run it does not know, or whose plugin has no benchmark: 0, the fixed loop stands in.
    assert measure(host, "unknown").app_bench_cpu_s == 0.0  # type: ignore[arg-type]


async def test_a_benchmark_that_raises_costs_only_the_application_speed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = make_state()
    known_run(state, info())

    def broken() -> None:
        raise ValueError("no input here")

    _with_benchmark(state, broken)
    async with trio.open_nursery() as nursery:
        host = _Host(state, nursery)
        measure(host, "r1")  # type: ignore[arg-type]
    assert "benchmark failed" in caplog.text and "no input here" in caplog.text
    async with trio.open_nursery() as nursery:
        host.nursery = nursery
        assert measure(host, "r1").app_bench_cpu_s == 0.0  # type: ignore[arg-type]
