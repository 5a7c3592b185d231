"""tsp CITIES SEED [shared|args]: the length of the shortest round trip through seeded cities.

Cities lie on a 1000 x 1000 integer grid from ``random.Random(SEED)``; distances are Euclidean
rounded to the nearest integer (TSPLIB's EUC_2D), so the optimum is an exact integer whatever
the order of additions. Tours start at city 0. A node extends a partial path by one city;
it is pruned when its length plus a lower bound for the rest (every unvisited city still needs
an edge out, at least its cheapest one) reaches the best tour known. The nearest-neighbour tour
gives the first bound.

The first SPAWN_DEPTH levels are spawned, one job per next city; below, a node searches
sequentially. The best tour known is a shared object (``Bound``, satind/shared.py): a job that
finds a shorter tour improves it with a global call, which reaches every peer's replica, so a
bound found on one peer prunes work on all of them (satin-grid-programming-model §3.2).

The answer travels as return values; the shared bound only prunes (docs/plugins.md, "Shared
objects"). Each job returns the shortest tour it completed, or the bound it was given
(``found``: the nearest-neighbour tour, which the root returns itself). A job prunes a node
whose lower bound is strictly above the shared bound, or at least what it returns anyway.
Every value involved is the length of a real tour, so no optimal tour is ever pruned: the job
whose part of the tree holds one returns its length, whatever the bound's replica said (late,
lost, or made again fresh by a new master's epoch), and the root's minimum is the optimum.
With ``args`` the bound travels as an argument instead, as before shared objects: a child
knows only the bound its parent knew when it spawned it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from itertools import combinations

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

SPAWN_DEPTH = 3

Dist = tuple[tuple[int, ...], ...]


def cities(n: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.randint(0, 1000), rng.randint(0, 1000)) for _ in range(n)]


def distances(points: list[tuple[int, int]]) -> Dist:
    return tuple(
        tuple(math.floor(math.hypot(ax - bx, ay - by) + 0.5) for bx, by in points)
        for ax, ay in points
    )


def nearest_neighbour(dist: Dist) -> int:
    n = len(dist)
    here, left, total = 0, set(range(1, n)), 0
    while left:
        nxt = min(left, key=lambda c: (dist[here][c], c))
        total += dist[here][nxt]
        left.remove(nxt)
        here = nxt
    return total + dist[here][0]


def min_out(dist: Dist) -> tuple[int, ...]:
    """Each city's cheapest edge: the bound's building block."""
    n = len(dist)
    return tuple(min(dist[i][j] for j in range(n) if j != i) for i in range(n))


def search_seq(
    dist: Dist,
    cheap: tuple[int, ...],
    here: int,
    visited: int,
    length: int,
    rest_bound: int,
    best: int,
) -> int:
    """Shortest completion from this partial tour, or ``best`` if none is shorter."""
    VISITED[0] += 1
    n = len(dist)
    if visited == (1 << n) - 1:
        return min(best, length + dist[here][0])
    row = dist[here]
    for city in range(1, n):
        bit = 1 << city
        if visited & bit:
            continue
        new_length = length + row[city]
        new_rest = rest_bound - cheap[city]
        if new_length + new_rest + cheap[city] > best:
            # The bound: every unvisited city (and this one) still needs its cheapest edge.
            continue
        best = search_seq(dist, cheap, city, visited | bit, new_length, new_rest, best)
    return best


def extensions(
    dist: Dist,
    cheap: tuple[int, ...],
    here: int,
    visited: int,
    length: int,
    rest: int,
    best: int,
    found: int | None = None,
) -> list[tuple[int, int, int]]:
    """(city, length, rest bound) of each next city a spawning node does not prune: its bound
    is at most ``best`` and, if given, below ``found``."""
    out = []
    row = dist[here]
    for city in range(1, len(dist)):
        if visited & (1 << city):
            continue
        new_length = length + row[city]
        new_rest = rest - cheap[city]
        low = new_length + new_rest + cheap[city]
        if low <= best and (found is None or low < found):
            out.append((city, new_length, new_rest))
    return out


@spawnable
def tour(
    dist: Dist,
    cheap: tuple[int, ...],
    here: int,
    visited: int,
    length: int,
    rest_bound: int,
    best: int,
    depth: int,
) -> int:
    n = len(dist)
    if depth == 0 or visited == (1 << n) - 1:
        return int(searched(search_seq, dist, cheap, here, visited, length, rest_bound, best))
    count("nodes")
    handles = [
        tour.spawn(dist, cheap, city, visited | 1 << city, new_length, new_rest, best, depth - 1)
        for city, new_length, new_rest in extensions(
            dist, cheap, here, visited, length, rest_bound, best
        )
    ]
    sync()
    for handle in handles:
        best = min(best, handle.result())
    return best


class Bound(SharedObject):
    """The shortest tour known, replicated on every peer."""

    def __init__(self, best: int) -> None:
        self.best = best

    @global_method
    def improve(self, length: int) -> None:
        if length < self.best:
            self.best = length


def search_shared(
    dist: Dist,
    cheap: tuple[int, ...],
    here: int,
    visited: int,
    length: int,
    rest_bound: int,
    bound: Bound,
    found: int,
) -> int:
    """The shortest tour completed from this partial tour if shorter than ``found``, else
    ``found``. Prunes with the shared bound (strictly: a tour as long as the bound may be the
    one this job must return) and with ``found``; improves the bound as soon as a tour is
    shorter (every peer prunes with it from then on)."""
    VISITED[0] += 1
    n = len(dist)
    if visited == (1 << n) - 1:
        total = length + dist[here][0]
        if total < bound.best:
            bound.improve(total)
        return min(found, total)
    row = dist[here]
    for city in range(1, n):
        bit = 1 << city
        if visited & bit:
            continue
        new_length = length + row[city]
        new_rest = rest_bound - cheap[city]
        low = new_length + new_rest + cheap[city]
        if low > bound.best or low >= found:
            continue
        found = search_shared(dist, cheap, city, visited | bit, new_length, new_rest, bound, found)
    return found


@spawnable
def tour_shared(
    dist: Dist,
    cheap: tuple[int, ...],
    here: int,
    visited: int,
    length: int,
    rest_bound: int,
    bound: Bound,
    found: int,
    depth: int,
) -> int:
    """The shortest tour below this node if shorter than ``found``, else ``found``."""
    n = len(dist)
    if depth == 0 or visited == (1 << n) - 1:
        return int(
            searched(search_shared, dist, cheap, here, visited, length, rest_bound, bound, found)
        )
    count("nodes")
    # The bound changes only at a safe point (a sync), never between these spawns.
    handles = [
        tour_shared.spawn(
            dist, cheap, city, visited | 1 << city, new_length, new_rest, bound, found, depth - 1
        )
        for city, new_length, new_rest in extensions(
            dist, cheap, here, visited, length, rest_bound, bound.best, found
        )
    ]
    sync()
    return min([found, *(handle.result() for handle in handles)])


@spawnable
def solve(dist: Dist, cheap: tuple[int, ...], rest: int, best: int, mode: str) -> int:
    """The run's root: the optimum, with the bound shared or passed down."""
    if mode == "args":
        return tour(dist, cheap, 0, 1, 0, rest, best, SPAWN_DEPTH)
    bound = Bound(best)  # made in the root job: the same id if the root runs again
    # A plain call: its spawns are this job's. The answer is what it returns, never the
    # bound's replica (it only prunes).
    return tour_shared(dist, cheap, 0, 1, 0, rest, bound, best, SPAWN_DEPTH)


def parse(argv: Sequence[str]) -> tuple[Dist, tuple[int, ...], int, int, str]:
    at_most(argv, 3)
    n = int_arg(argv, 0, "CITIES", low=3, high=64)
    seed = int_arg(argv, 1, "SEED", low=0, high=2**63)
    mode = argv[2] if len(argv) > 2 else "shared"
    if mode not in ("shared", "args"):
        raise UsageError(f"the bound is 'shared' (a shared object) or 'args', not {mode!r}")
    dist = distances(cities(n, seed))
    cheap = min_out(dist)
    # rest_bound covers the cities not yet entered plus the edge back into city 0.
    rest = sum(cheap[1:]) + cheap[0]
    return dist, cheap, rest - cheap[0], nearest_neighbour(dist), mode


# Cities up to which the check computes the optimum again (Held-Karp, O(n^2 2^n) time): 18
# take about a second on one core and 35 MB (17: 0.4 s; 19: 2 s; 20: 4.5 s and 150 MB).
CHECK_CITIES = 18


def held_karp(dist: Dist) -> int:
    """Independent exact answer by dynamic programming over subsets (Held-Karp): for each set
    of cities other than 0, by size, and each city k of it, the shortest path from city 0
    through the set ending at k. Only two sizes are kept at a time."""
    n = len(dist)
    m = n - 1  # cities 1..n-1 as bits 0..m-1
    into = [[dist[j + 1][k + 1] for j in range(m)] for k in range(m)]  # into[k][j]: j -> k
    bits = [1 << k for k in range(m)]
    layer: dict[int, dict[int, int]] = {bits[k]: {k: dist[0][k + 1]} for k in range(m)}
    for size in range(2, m + 1):
        bigger: dict[int, dict[int, int]] = {}
        for members in combinations(range(m), size):
            mask = sum(bits[k] for k in members)
            ends: dict[int, int] = {}
            for k in members:
                col = into[k]
                ends[k] = min([cost + col[j] for j, cost in layer[mask ^ bits[k]].items()])
            bigger[mask] = ends
        layer = bigger
    last = layer[(1 << m) - 1]
    return min(cost + dist[k + 1][0] for k, cost in last.items())


def check(args: tuple[object, ...], result: int) -> None:
    dist = args[0]
    assert isinstance(dist, tuple)
    if len(dist) > CHECK_CITIES:
        raise NotChecked(
            f"{len(dist)} cities: the check computes the optimum again up to {CHECK_CITIES} "
            "(Held-Karp's time doubles with each city)"
        )
    expected = held_karp(dist)
    if result != expected:
        raise AssertionError(f"the optimal tour is {expected} long, not {result}")


PLUGIN = Plugin(
    name="tsp",
    entry=solve,
    usage="tsp CITIES SEED [shared|args]",
    parse=parse,
    max_branching=lambda args: len(args[0]),
    check=check,
    description="travelling salesman optimum by branch and bound on seeded cities",
)
