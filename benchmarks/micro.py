"""Spawn and sync costs in the form of the Satin paper's Table III: the average time of a plain
call and of a spawn followed by a sync, without parameters and with one parameter and a return
value, over a million calls in one job on a satind worker (in-process, no peer: the cost of
the primitives themselves); and the inlet rows: a spawn with an inlet whose child raises an
exception (without a field, or with one field after one parameter) and an empty handler, and
a spawn with an inlet whose child returns normally (the handler never runs).

    python benchmarks/micro.py [--repeat 5] [--quick] [--compare-gc]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import statistics
import time
from collections.abc import Callable

from satind.api import spawnable, sync
from satind.config import EngineConfig
from satind.engine import worker as worker_mod
from satind.engine.frames import make_root
from satind.engine.worker import Worker, tune_process
from satind.work.jobs import RunState

DEFAULT_GC = gc.get_threshold()


class _NoHooks:
    def report(self, event: object) -> None:
        pass


def plain_none() -> None:
    return None


def plain_ident(x: int) -> int:
    return x


@spawnable
def none() -> None:
    return None


@spawnable
def ident(x: int) -> int:
    return x


def loop_plain_none(n: int) -> None:
    for _ in range(n):
        plain_none()


def loop_plain_ident(n: int) -> None:
    total = 0
    for i in range(n):
        total += plain_ident(i)


def loop_spawn_none(n: int) -> None:
    for _ in range(n):
        none.spawn()
        sync()


def loop_spawn_ident(n: int) -> None:
    total = 0
    for i in range(n):
        h = ident.spawn(i)
        sync()
        total += h.result()


class Bare(Exception):
    pass


class Field(Exception):
    def __init__(self, value: int) -> None:
        super().__init__()
        self.value = value


@spawnable
def throw_none() -> None:
    raise Bare


@spawnable
def throw_field(x: int) -> None:
    raise Field(x)


def empty_inlet(exc: Exception) -> None:
    return None


def loop_inlet_none(n: int) -> None:
    for _ in range(n):
        throw_none.spawn_inlet(empty_inlet)
        sync()


def loop_inlet_field(n: int) -> None:
    for i in range(n):
        throw_field.spawn_inlet(empty_inlet, i)
        sync()


def loop_inlet_unused(n: int) -> None:
    total = 0
    for i in range(n):
        h = ident.spawn_inlet(empty_inlet, i)
        sync()
        total += h.result()


def loop_empty(n: int) -> None:
    for _ in range(n):
        pass


ROWS: list[tuple[str, Callable[[int], None]]] = [
    ("plain call, no parameter, no return", loop_plain_none),
    ("plain call, 1 parameter + return value", loop_plain_ident),
    ("spawn/sync, no parameter, no return", loop_spawn_none),
    ("spawn/sync, 1 parameter + return value", loop_spawn_ident),
    ("inlet spawn/sync, no parameter, exception without a field", loop_inlet_none),
    ("inlet spawn/sync, 1 parameter, exception with 1 field", loop_inlet_field),
    ("inlet spawn/sync, 1 parameter + return value, no exception", loop_inlet_unused),
]


def per_call_ns(body: Callable[[int], None], n: int, gc_young: int | None = None) -> float:
    """Run ``body(n)`` as a job on a worker; ns per iteration. ``gc_young``: CPython's
    young-generation GC threshold instead of a peer's (engine.gc_young_threshold)."""
    cfg = EngineConfig()
    if gc_young is not None:
        cfg = dataclasses.replace(cfg, gc_young_threshold=gc_young)
    tune_process(cfg)  # as a peer process does (GC threshold, switch interval)
    w = Worker(cfg, _NoHooks())
    worker_mod.CURRENT = w
    try:
        root = make_root(body, (n,), RunState("micro", "micro", 0.5))
        t = time.perf_counter()
        w.run_job(root)
        return (time.perf_counter() - t) / n * 1e9
    finally:
        worker_mod.CURRENT = None
        gc.set_threshold(*DEFAULT_GC)


def compare_gc(repeat: int, quick: bool) -> None:
    """The spawn/sync rows under CPython's default GC threshold and a peer's, interleaved."""
    n = 100_000 if quick else 1_000_000
    peer = EngineConfig().gc_young_threshold
    rows = ROWS[2:4]
    got: dict[tuple[str, int], list[float]] = {}
    for _ in range(repeat):
        for label, body in rows:
            for threshold in (DEFAULT_GC[0], peer):
                got.setdefault((label, threshold), []).append(per_call_ns(body, n, threshold))
    print(
        f"young-generation GC threshold: CPython's {DEFAULT_GC[0]} against a peer's {peer:,}; "
        f"{n:,} calls, median of {repeat} interleaved runs\n"
    )
    print(f"| benchmark | threshold {DEFAULT_GC[0]} (ns) | threshold {peer:,} (ns) |")
    print("|---|---|---|")
    for label, _ in rows:
        a = statistics.median(got[(label, DEFAULT_GC[0])])
        b = statistics.median(got[(label, peer)])
        print(f"| {label} | {a:.0f} | {b:.0f} |")


def table_iii(repeat: int, quick: bool) -> None:
    n = 100_000 if quick else 1_000_000
    results: dict[str, list[float]] = {label: [] for label, _ in ROWS}
    loop: list[float] = []
    for _ in range(repeat):  # interleaved, so machine noise hits every row alike
        loop.append(per_call_ns(loop_empty, n))
        for label, body in ROWS:
            results[label].append(per_call_ns(body, n))
    print(
        f"Average of {n:,} calls in one job, median of {repeat} runs; the loop itself costs "
        f"{statistics.median(loop):.0f} ns per iteration and is included, as in the paper.\n"
    )
    print("| benchmark | time (ns) | vs plain call |")
    print("|---|---|---|")
    plain = statistics.median(results[ROWS[0][0]])
    for label, _ in ROWS:
        t = statistics.median(results[label])
        print(f"| {label} | {t:.0f} | {t / plain:.1f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--compare-gc", action="store_true", help="spawn/sync with CPython's GC threshold too"
    )
    args = parser.parse_args()
    table_iii(args.repeat, args.quick)
    if args.compare_gc:
        print()
        compare_gc(args.repeat, args.quick)


if __name__ == "__main__":
    main()
