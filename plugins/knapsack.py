"""knapsack ITEMS SEED [shared|args]: a seeded 0/1 knapsack optimum, by branch and bound.

The instance: ITEMS items with weights and values drawn from ``random.Random(SEED)``, strongly
correlated (value = weight + 50, the hard kind for branch and bound), capacity half the total
weight. Items are sorted by value density; a node decides one item (take it or not) and prunes
when the fractional-relaxation bound cannot beat the best value known.

The first SPAWN_DEPTH levels are spawned (two children per node); below, a node searches its
subtree sequentially. The best value known is a shared object (``Best``, satind/shared.py):
a job that finds a better packing improves it with a global call, and every peer prunes with
it from then on (satin-grid-programming-model §3.2).

The answer travels as return values; the shared best only prunes (docs/plugins.md, "Shared
objects"). Each job returns the best value it packed, or the first bound it was given (the
dive's value, which the root returns itself). A job prunes a node whose relaxation is
strictly below the shared best, or at most what it returns anyway. Every value involved is
that of a real packing, so no optimal packing is ever pruned: the job whose part of the tree
holds one returns its value, whatever the replica said (late, lost, or made again fresh by a
new master's epoch), and the root's maximum is the optimum. With ``args`` the best value is
passed down instead, as before shared objects: a spawned child only knows what its parent
knew.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from satind import (
    NotChecked,
    Plugin,
    SharedObject,
    UsageError,
    count,
    global_method,
    spawnable,
    sync,
)

from ._args import at_most, int_arg
from ._count import VISITED, searched

SPAWN_DEPTH = 12
# nodes of the depth-first dive that finds the first lower bound (about 0.25 s of CPython)
DIVE_NODES = 1_000_000

Items = tuple[tuple[int, ...], tuple[int, ...]]  # (weights, values), sorted by density


def instance(items: int, seed: int) -> tuple[Items, int]:
    """The seeded instance: ((weights, values) sorted by value density, capacity)."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(items):
        w = rng.randint(1, 1000)
        pairs.append((w, w + 50))
    pairs.sort(key=lambda p: p[1] / p[0], reverse=True)
    weights = tuple(p[0] for p in pairs)
    values = tuple(p[1] for p in pairs)
    return (weights, values), sum(weights) // 2


def bound(items: Items, i: int, room: int, value: int) -> float:
    """Fractional relaxation: fill greedily by density, the last item in part."""
    weights, values = items
    n = len(weights)
    while i < n and weights[i] <= room:
        room -= weights[i]
        value += values[i]
        i += 1
    if i < n:
        return value + values[i] * room / weights[i]
    return value


def greedy(items: Items, capacity: int) -> int:
    """Value of the greedy packing by density: the first lower bound every job starts from.

    Without it each spawned subtree would have to find its own best packing before it could
    prune, which is far harder than proving that nothing beats a good known packing.
    """
    weights, values = items
    room, value = capacity, 0
    for w, v in zip(weights, values, strict=True):
        if w <= room:
            room -= w
            value += v
    return value


def dive(items: Items, capacity: int, budget: int) -> int:
    """Best value a depth-first search finds within ``budget`` nodes, starting from greedy.

    On these instances most of a branch-and-bound search is spent proving that no better
    packing exists, not finding one: a short dive usually finds the optimum or gets close,
    and every job then starts from it (knapsack has no shared bound between jobs yet).
    """
    weights, values = items
    n = len(weights)
    best = greedy(items, capacity)
    left = budget
    stack = [(0, capacity, 0)]
    while stack and left > 0:
        i, room, value = stack.pop()
        left -= 1
        if value > best:
            best = value
        if i == n or bound(items, i, room, value) <= best:
            continue
        stack.append((i + 1, room, value))
        if weights[i] <= room:
            stack.append((i + 1, room - weights[i], value + values[i]))
    return best


def search_seq(items: Items, i: int, room: int, value: int, best: int) -> int:
    """Best value reachable from this node, or ``best`` if nothing beats it (sequential)."""
    VISITED[0] += 1
    weights, values = items
    n = len(weights)
    if value > best:
        best = value
    if i == n or bound(items, i, room, value) <= best:
        return best
    if weights[i] <= room:
        best = search_seq(items, i + 1, room - weights[i], value + values[i], best)
    return search_seq(items, i + 1, room, value, best)


@spawnable
def knap(items: Items, i: int, room: int, value: int, best: int, depth: int) -> int:
    weights, values = items
    if depth == 0 or i == len(weights):
        return int(searched(search_seq, items, i, room, value, best))
    count("nodes")
    best = max(best, value)
    if bound(items, i, room, value) <= best:
        return best
    take = None
    if weights[i] <= room:
        take = knap.spawn(items, i + 1, room - weights[i], value + values[i], best, depth - 1)
    leave = knap.spawn(items, i + 1, room, value, best, depth - 1)
    sync()
    result = leave.result()
    if take is not None:
        result = max(result, take.result())
    return result


class Best(SharedObject):
    """The best value known, replicated on every peer."""

    def __init__(self, value: int) -> None:
        self.value = value

    @global_method
    def improve(self, value: int) -> None:
        if value > self.value:
            self.value = value


def search_shared(items: Items, i: int, room: int, value: int, best: Best, found: int) -> int:
    """The best value reachable from this node if above ``found``, else ``found``. Prunes with
    the shared best (strictly: a packing as good as it may be the one this job must return)
    and with ``found``; improves the shared best as soon as it is beaten."""
    VISITED[0] += 1
    weights, values = items
    if value > found:
        found = value
    if value > best.value:
        best.improve(value)
    if i == len(weights):
        return found
    relaxed = bound(items, i, room, value)
    if relaxed <= found or relaxed < best.value:
        return found
    if weights[i] <= room:
        found = search_shared(items, i + 1, room - weights[i], value + values[i], best, found)
    return search_shared(items, i + 1, room, value, best, found)


@spawnable
def knap_shared(
    items: Items, i: int, room: int, value: int, best: Best, found: int, depth: int
) -> int:
    """The best value below this node if above ``found``, else ``found``."""
    weights, values = items
    if depth == 0 or i == len(weights):
        return int(searched(search_shared, items, i, room, value, best, found))
    count("nodes")
    found = max(found, value)
    if value > best.value:
        best.improve(value)
    relaxed = bound(items, i, room, value)
    if relaxed <= found or relaxed < best.value:
        return found
    take = None
    if weights[i] <= room:
        take = knap_shared.spawn(
            items, i + 1, room - weights[i], value + values[i], best, found, depth - 1
        )
    leave = knap_shared.spawn(items, i + 1, room, value, best, found, depth - 1)
    sync()
    result = max(found, leave.result())
    if take is not None:
        result = max(result, take.result())
    return result


@spawnable
def solve(items: Items, i: int, room: int, value: int, best: int, depth: int, mode: str) -> int:
    """The run's root: the optimum, with the best value shared or passed down."""
    if mode == "args":
        return knap(items, i, room, value, best, depth)
    shared = Best(best)  # made in the root job: the same id if the root runs again
    # A plain call: its spawns are this job's. The answer is what it returns, never the
    # shared best's replica (it only prunes).
    return knap_shared(items, i, room, value, shared, best, depth)


def parse(argv: Sequence[str]) -> tuple[Items, int, int, int, int, int, str]:
    at_most(argv, 3)
    n = int_arg(argv, 0, "ITEMS", low=1, high=10_000)
    seed = int_arg(argv, 1, "SEED", low=0, high=2**63)
    mode = argv[2] if len(argv) > 2 else "shared"
    if mode not in ("shared", "args"):
        raise UsageError(f"the best value is 'shared' (a shared object) or 'args', not {mode!r}")
    items, capacity = instance(n, seed)
    return items, 0, capacity, 0, dive(items, capacity, DIVE_NODES), SPAWN_DEPTH, mode


def optimum_dp(items: Items, capacity: int) -> int:
    """Independent answer by dynamic programming over capacities (O(ITEMS x capacity))."""
    weights, values = items
    table = [0] * (capacity + 1)
    for w, v in zip(weights, values, strict=True):
        for c in range(capacity, w - 1, -1):
            cand = table[c - w] + v
            if cand > table[c]:
                table[c] = cand
    return table[capacity]


# Items times capacity up to which the check runs the dynamic program (a few seconds).
CHECK_CELLS = 20_000_000


def check(args: tuple[object, ...], result: int) -> None:
    items, _, capacity = args[0], args[1], args[2]
    assert isinstance(items, tuple) and isinstance(capacity, int)
    if len(items[0]) * capacity > CHECK_CELLS:
        raise NotChecked(
            f"{len(items[0])} items x capacity {capacity}: the check's dynamic program runs "
            f"up to {CHECK_CELLS:,} cells"
        )
    expected = optimum_dp(items, capacity)
    if result != expected:
        raise AssertionError(f"optimal value is {expected}, not {result}")


PLUGIN = Plugin(
    name="knapsack",
    entry=solve,
    usage="knapsack ITEMS SEED [shared|args]",
    parse=parse,
    max_branching=2,
    check=check,
    description="0/1 knapsack optimum by branch and bound on a seeded instance",
)
