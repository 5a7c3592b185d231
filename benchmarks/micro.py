"""Spawn and sync costs in the form of the Satin paper's Table III: the average time of a plain
call and of a spawn followed by a sync, without parameters and with one parameter and a return
value, over a million calls in one job on a satind worker (in-process, no peer: the cost of
the primitives themselves). Inlets come with a later issue.

    python benchmarks/micro.py [--repeat 5] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from satind.api import spawnable, sync
from satind.config import EngineConfig
from satind.engine import worker as worker_mod
from satind.engine.jobs import RunState
from satind.engine.worker import Worker, make_root, tune_process


class _NoHooks:
    def want_work(self, wanted: bool) -> None: ...
    def job_finished(self, job: object) -> None: ...
    def orphan_hit(self, job: object, holder: str) -> None: ...
    def orphan_result(self, job: object) -> None: ...
    def job_logged(self, job: object) -> None: ...
    def snapshot_taken(self) -> None: ...


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


def loop_empty(n: int) -> None:
    for _ in range(n):
        pass


ROWS: list[tuple[str, Callable[[int], None]]] = [
    ("plain call, no parameter, no return", loop_plain_none),
    ("plain call, 1 parameter + return value", loop_plain_ident),
    ("spawn/sync, no parameter, no return", loop_spawn_none),
    ("spawn/sync, 1 parameter + return value", loop_spawn_ident),
]


def per_call_ns(body: Callable[[int], None], n: int) -> float:
    """Run ``body(n)`` as a job on a worker; ns per iteration."""
    tune_process(EngineConfig())  # as a peer process does (GC threshold, switch interval)
    w = Worker(EngineConfig(), _NoHooks())
    worker_mod.CURRENT = w
    try:
        root = make_root(body, (n,), RunState("micro", "micro", 0.5))
        t = time.perf_counter()
        w.run_job(root)
        return (time.perf_counter() - t) / n * 1e9
    finally:
        worker_mod.CURRENT = None


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
    args = parser.parse_args()
    table_iii(args.repeat, args.quick)


if __name__ == "__main__":
    main()
