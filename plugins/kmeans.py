"""kmeans POINTS K PARTS [SEED] [MAX_ITER]: Lloyd's k-means on seeded 2-D points, an iterative
master-worker application (satind/iterative.py; scheduling-iterative-apps-volatile-resources).

The points come in PARTS partitions, each drawn from its own seeded generator around K hidden
centres. Each iteration has one task per partition: assign its points to the nearest centroid
and return, per cluster, the sums of x and y and the count. The barrier adds the partitions'
sums in partition order and moves every centroid to its cluster's mean; the run stops when no
centroid moves or after MAX_ITER iterations. A task is a function of its input alone and the
sums are added in a fixed order, so the answer is the same bit for bit under any schedule,
on any number of workers: the check runs the same iterations without satind and compares.
The result is the final centroids (rounded for the report) and the iterations run.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from satind import UsageError, iterative_plugin

from ._args import at_most, int_arg

Point = tuple[float, float]


def partition(seed: int, k: int, points: int, parts: int, index: int) -> list[Point]:
    """The points of partition ``index``: around K centres drawn from ``seed`` alone."""
    centres = random.Random(f"kmeans:{seed}").sample(range(1000), 2 * k)
    rng = random.Random(f"kmeans:{seed}:{index}")
    size = points // parts + (1 if index < points % parts else 0)
    out = []
    for _ in range(size):
        c = rng.randrange(k)
        out.append((centres[2 * c] + rng.gauss(0, 40), centres[2 * c + 1] + rng.gauss(0, 40)))
    return out


Args = tuple[int, int, int, int, int]  # points, k, parts, seed, max_iter
State = list[Any]  # [centroids, moved]


def initial(args: Args) -> State:
    points, k, parts, seed, _ = args
    first = partition(seed, k, points, parts, 0)
    return [[list(p) for p in first[:k]], True]


def tasks(args: Args, state: State, iteration: int) -> list[Any]:
    return [[i, state[0]] for i in range(args[2])]


def task(args: Args, item: Any) -> list[list[float]]:
    """Per cluster [sum x, sum y, count] over one partition."""
    points, k, parts, seed, _ = args
    index, centroids = item
    sums = [[0.0, 0.0, 0.0] for _ in range(k)]
    for x, y in partition(seed, k, points, parts, index):
        best, best_d = 0, float("inf")
        for c, (cx, cy) in enumerate(centroids):
            d = (x - cx) * (x - cx) + (y - cy) * (y - cy)
            if d < best_d:
                best, best_d = c, d
        s = sums[best]
        s[0] += x
        s[1] += y
        s[2] += 1
    return sums


def combine(args: Args, state: State, results: list[Any], iteration: int) -> State:
    k = args[1]
    total = [[0.0, 0.0, 0.0] for _ in range(k)]
    for sums in results:  # in partition order: the same floating-point sums every time
        for c in range(k):
            for j in range(3):
                total[c][j] += sums[c][j]
    old = state[0]
    new = [
        [total[c][0] / total[c][2], total[c][1] / total[c][2]] if total[c][2] else list(old[c])
        for c in range(k)
    ]
    return [new, new != old]


def done(args: Args, state: State, iterations: int) -> bool:
    return iterations >= args[4] or not state[1]


def sequential(args: Args) -> tuple[State, int]:
    """The same iterations without satind: the final state and how many ran."""
    state, iteration = initial(args), 0
    while not done(args, state, iteration):
        results = [task(args, item) for item in tasks(args, state, iteration)]
        state = combine(args, state, results, iteration)
        iteration += 1
    return state, iteration


def parse(argv: Sequence[str]) -> Args:
    at_most(argv, 5)
    points = int_arg(argv, 0, "POINTS", low=1, high=10_000_000)
    k = int_arg(argv, 1, "K", low=1, high=100)
    parts = int_arg(argv, 2, "PARTS", low=1, high=10_000)
    seed = int_arg(argv, 3, "SEED", low=0, high=2**31, default=1)
    max_iter = int_arg(argv, 4, "MAX_ITER", low=1, high=10_000, default=50)
    if points < k:
        raise UsageError(f"POINTS ({points}) must be at least K ({k})")
    return points, k, parts, seed, max_iter


def check(args: Args, result: State) -> None:
    expected, _ = sequential(args)
    if result != expected:
        raise AssertionError(f"centroids {result[0]} differ from a sequential run's {expected[0]}")


def report(argv: Sequence[str], result: State) -> dict[str, Any]:
    return {"centroids": [[round(x, 3), round(y, 3)] for x, y in result[0]]}


PLUGIN = iterative_plugin(
    "kmeans",
    usage="kmeans POINTS K PARTS [SEED] [MAX_ITER]",
    parse=parse,
    initial=initial,
    tasks=tasks,
    task=task,
    combine=combine,
    done=done,
    check=check,
    report=report,
    description="Lloyd's k-means as an iterative master-worker run (one task per partition)",
)
