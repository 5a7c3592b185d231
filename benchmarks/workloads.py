"""The comparison's workloads as plain divide-and-conquer specs, for the systems that are not
satind (Ray, Dask, a process pool, sequential): each one splits a task exactly where the satind
plugin spawns, runs the plugin's own sequential code at the leaves and combines as the plugin
does, so every system does the same work at the same grain and must give the same answer.

A spec is three functions of (params, task): ``split`` (the children, or None for a leaf),
``leaf`` and ``combine`` (params, task, child results). Params are fixed per run (the knapsack
instance, the image size); tasks are small tuples. Everything is picklable by name, so Ray,
Dask and process pools can ship it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from satind_plugins import fib, knapsack, nqueens, raytracer, tree

Task = tuple[Any, ...]


@dataclass(frozen=True)
class Workload:
    """One row of the comparison: the satind command and the same computation as a spec."""

    label: str
    argv: tuple[str, ...]  # `satind run` arguments (plugin first)
    spec: str  # key into SPECS
    params: Any
    root: Task

    def answer(self, value: Any) -> Any:
        """What is compared between systems (the raytracer's image by its digest)."""
        return hashlib.sha256(value).hexdigest() if isinstance(value, bytes) else value


# -- fib -------------------------------------------------------------------------------------


def fib_split(threshold: int, task: Task) -> list[Task] | None:
    (n,) = task
    return None if n < max(threshold, 2) else [(n - 1,), (n - 2,)]


def fib_leaf(threshold: int, task: Task) -> int:
    return fib.fib_seq(task[0])


def add(params: Any, task: Task, results: Sequence[int]) -> int:
    return sum(results)


# -- nqueens ---------------------------------------------------------------------------------


def queens_split(n: int, task: Task) -> list[Task] | None:
    cols, d1, d2, depth = task
    full = (1 << n) - 1
    if depth == 0 or cols == full:
        return None
    out = []
    free = full & ~(cols | d1 | d2)
    while free:
        bit = free & -free
        free ^= bit
        out.append((cols | bit, ((d1 | bit) << 1) & full, (d2 | bit) >> 1, depth - 1))
    return out


def queens_leaf(n: int, task: Task) -> int:
    cols, d1, d2, _ = task
    return nqueens.count_seq(n, cols, d1, d2)


# -- knapsack --------------------------------------------------------------------------------


def knap_split(items: knapsack.Items, task: Task) -> list[Task] | None:
    i, room, value, best, depth = task
    weights, values = items
    if depth == 0 or i == len(weights):
        return None
    best = max(best, value)
    if knapsack.bound(items, i, room, value) <= best:
        return None
    out = []
    if weights[i] <= room:  # take it (spawned first, as the plugin does)
        out.append((i + 1, room - weights[i], value + values[i], best, depth - 1))
    out.append((i + 1, room, value, best, depth - 1))
    return out


def knap_leaf(items: knapsack.Items, task: Task) -> int:
    i, room, value, best, depth = task
    if depth == 0 or i == len(items[0]):
        return knapsack.search_seq(items, i, room, value, best)
    return max(best, value)  # pruned by the bound


def best_of(params: Any, task: Task, results: Sequence[int]) -> int:
    return max(results)


# -- raytracer -------------------------------------------------------------------------------


def tile_split(size: tuple[int, int], task: Task) -> list[Task] | None:
    quads = raytracer.quadrants(*task)
    return None if quads is None else list(quads)


def tile_leaf(size: tuple[int, int], task: Task) -> bytes:
    return raytracer.render_tile(size[0], size[1], *task)


def tile_paste(size: tuple[int, int], task: Task, results: Sequence[bytes]) -> bytes:
    quads = tile_split(size, task)
    assert quads is not None
    x0, y0, w, h = task
    return raytracer.paste(list(zip(quads, results, strict=True)), x0, y0, w, h)


# -- tree (and the flat bag: a tree of depth 1) ----------------------------------------------


def tree_split(params: tuple[int, float, str], task: Task) -> list[Task] | None:
    path, depth = task
    branching = params[0]
    return None if depth == 0 else [((*path, i), depth - 1) for i in range(branching)]


def tree_leaf(params: tuple[int, float, str], task: Task) -> int:
    tree.work(params[1], params[2])
    return tree.leaf_value(task[0])


def tree_sum(params: Any, task: Task, results: Sequence[int]) -> int:
    return sum(results) & tree.MASK


Split = Callable[[Any, Task], list[Task] | None]
Leaf = Callable[[Any, Task], Any]
Combine = Callable[[Any, Task, Sequence[Any]], Any]

SPECS: dict[str, tuple[Split, Leaf, Combine]] = {
    "fib": (fib_split, fib_leaf, add),
    "nqueens": (queens_split, queens_leaf, add),
    "knapsack": (knap_split, knap_leaf, best_of),
    "raytracer": (tile_split, tile_leaf, tile_paste),
    "tree": (tree_split, tree_leaf, tree_sum),
}


def solve_seq(spec: str, params: Any, task: Task) -> Any:
    """The whole subtree below ``task``, sequentially (leaves and combines as the plugin)."""
    split, leaf, combine = SPECS[spec]
    children = split(params, task)
    if children is None:
        return leaf(params, task)
    return combine(params, task, [solve_seq(spec, params, c) for c in children])


def expand(spec: str, params: Any, task: Task, at_least: int) -> list[Task]:
    """Split breadth-first until there are ``at_least`` subtrees (or only leaves): how a
    process pool is fed a recursive problem."""
    split = SPECS[spec][0]
    frontier = [task]
    while len(frontier) < at_least:
        grown: list[Task] = []
        changed = False
        for t in frontier:
            children = split(params, t)
            if children is None:
                grown.append(t)
            else:
                grown.extend(children)
                changed = True
        frontier = grown
        if not changed:
            break
    return frontier


def fold(spec: str, params: Any, task: Task, done: dict[Task, Any]) -> Any:
    """Combine the results of ``expand``'s subtrees (``done``) back up to ``task``."""
    if task in done:
        return done[task]
    split, _, combine = SPECS[spec]
    children = split(params, task)
    assert children is not None
    return combine(params, task, [fold(spec, params, c, done) for c in children])


def workloads(quick: bool = False) -> list[Workload]:
    """The comparison's rows (``quick``: small sizes for a smoke test).

    The sizes keep the number of *inner* nodes small (at most ~90): Ray runs a nested task
    that waits in ``ray.get`` by starting another worker process, and every waiting inner
    node holds one (about 90 MB each), so a deeper tree exhausts memory before it is slow.
    """
    q = quick
    fine_n, coarse_n = (26, 32) if q else (30, 36)
    queens_n = 10 if q else 13
    knap_items = 40 if q else 80
    side = 128 if q else 256
    items, capacity = knapsack.instance(knap_items, 1)
    knap_args = knapsack.parse([str(knap_items), "1"])
    bag, bag_ms = (16, 20.0) if q else (64, 100.0)
    return [
        Workload(
            "fib, fine grain (~1 ms leaves)",
            ("fib", str(fine_n), "21"),
            "fib",
            21,
            (fine_n,),
        ),
        Workload(
            "fib, coarse grain (~100 ms leaves)",
            ("fib", str(coarse_n), "29"),
            "fib",
            29,
            (coarse_n,),
        ),
        Workload(
            f"nqueens {queens_n}",
            ("nqueens", str(queens_n), "2"),
            "nqueens",
            queens_n,
            (0, 0, 0, 2),
        ),
        Workload(
            f"knapsack {knap_items} items",
            ("knapsack", str(knap_items), "1"),
            "knapsack",
            items,
            (0, capacity, 0, knap_args[4], knap_args[5]),
        ),
        Workload(
            f"raytracer {side}x{side}",
            ("raytracer", str(side), str(side)),
            "raytracer",
            (side, side),
            (0, 0, side, side),
        ),
        Workload(
            f"flat bag, {bag} x {bag_ms:g} ms",
            ("tree", "1", str(bag), str(bag_ms), "busy"),
            "tree",
            (bag, bag_ms, "busy"),
            ((), 1),
        ),
    ]
