"""Independent sequential implementations the plugins are checked against.

Deliberately different algorithms from the plugins' own (brute force, dynamic programming,
array backtracking), so a shared bug cannot hide.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math


def fib(n: int) -> int:
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def nqueens(n: int) -> int:
    cols: list[int] = []

    def place(row: int) -> int:
        if row == n:
            return 1
        total = 0
        for c in range(n):
            if all(c != pc and abs(c - pc) != row - pr for pr, pc in enumerate(cols)):
                cols.append(c)
                total += place(row + 1)
                cols.pop()
        return total

    return place(0)


def knapsack(weights: list[int], values: list[int], capacity: int) -> int:
    best = {0: 0}  # weight -> best value, sparse DP
    for w, v in zip(weights, values, strict=True):
        for have, val in list(best.items()):
            nw = have + w
            if nw <= capacity and best.get(nw, -1) < val + v:
                best[nw] = val + v
    return max(best.values())


def tsp(points: list[tuple[int, int]]) -> int:
    def d(a: tuple[int, int], b: tuple[int, int]) -> int:
        return math.floor(math.sqrt((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2) + 0.5)

    best = None
    for perm in itertools.permutations(range(1, len(points))):
        order = (0, *perm, 0)
        length = sum(d(points[order[i]], points[order[i + 1]]) for i in range(len(order) - 1))
        best = length if best is None else min(best, length)
    assert best is not None
    return best


def tsp_exact(points: list[tuple[int, int]]) -> int:
    """The shortest round trip by a recursive, memoized dynamic program: the shortest path
    from a city through a set of cities back to city 0 (not the plugin's Held-Karp, which
    builds paths forward from city 0 over bitmasks). Fine to about 13 cities."""

    def d(a: int, b: int) -> int:
        (ax, ay), (bx, by) = points[a], points[b]
        return math.floor(math.sqrt((ax - bx) ** 2 + (ay - by) ** 2) + 0.5)

    @functools.cache
    def back(here: int, left: frozenset[int]) -> int:
        if not left:
            return d(here, 0)
        return min(d(here, nxt) + back(nxt, left - {nxt}) for nxt in left)

    return back(0, frozenset(range(1, len(points))))


def satisfiable(clauses: list[tuple[int, ...]], variables: int) -> bool:
    for bits in range(1 << variables):
        if all(
            any((bits >> (abs(lit) - 1)) & 1 == (lit > 0) for lit in clause) for clause in clauses
        ):
            return True
    return False


def tree(depth: int, branching: int) -> int:
    def walk(path: tuple[int, ...]) -> int:
        if len(path) == depth:
            return int.from_bytes(hashlib.blake2b(bytes(path), digest_size=8).digest(), "big")
        return sum(walk((*path, i)) for i in range(branching))

    return walk(()) % 2**64
