"""What a built-in plugin's answer must be, found without satind: the end-to-end crash tests
and `benchmarks/crashes.py` compare a run's JSON result with these, not only with the
plugin's own check.

Where an independent algorithm exists it is used (tests/independent.py: brute force, dynamic
programming, a different search); where the answer is a certificate (a SAT model, a needle)
it is verified; otherwise the plugin's code runs sequentially, outside any runtime (plain
calls: a spawn runs at once), which is what a distributed run must reproduce.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from satind_plugins import (
    _heat,
    barneshut,
    heat2d,
    kmeans,
    knapsack,
    othello,
    raytracer,
    sat,
    search,
    tsp,
)

from tests import independent

# OEIS A000170 (independent.nqueens takes minutes past 12).
QUEENS = {8: 92, 9: 352, 10: 724, 11: 2680, 12: 14200, 13: 73712, 14: 365596, 15: 2279184}


def held_karp(points: Sequence[tuple[int, int]]) -> int:
    """The optimal tour length by dynamic programming over subsets, on the plugin's rounded
    Euclidean distances (written apart from the plugin's own check)."""
    n = len(points)
    d = [[round_distance(a, b) for b in points] for a in points]
    best: dict[tuple[int, int], int] = {(1 << k, k): d[0][k] for k in range(1, n)}
    for size in range(2, n):
        layer: dict[tuple[int, int], int] = {}
        for (subset, last), cost in best.items():
            if bin(subset).count("1") != size - 1:
                continue
            for k in range(1, n):
                if subset & (1 << k):
                    continue
                key = (subset | (1 << k), k)
                value = cost + d[last][k]
                if value < layer.get(key, value + 1):
                    layer[key] = value
        best.update(layer)
    full = (1 << n) - 2
    return min(best[(full, k)] + d[k][0] for k in range(1, n))


def round_distance(a: tuple[int, int], b: tuple[int, int]) -> int:
    return int(((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2) ** 0.5 + 0.5)


def _fib(argv: Sequence[str], result: Any) -> None:
    _same(result, independent.fib(int(argv[0])))


def _nqueens(argv: Sequence[str], result: Any) -> None:
    n = int(argv[0])
    _same(result, QUEENS[n] if n in QUEENS else independent.nqueens(n))


def _tree(argv: Sequence[str], result: Any) -> None:
    _same(result, independent.tree(int(argv[0]), int(argv[1])))


def _knapsack(argv: Sequence[str], result: Any) -> None:
    (weights, values), capacity = knapsack.instance(int(argv[0]), int(argv[1]))
    _same(result, independent.knapsack(list(weights), list(values), capacity))


def _tsp(argv: Sequence[str], result: Any) -> None:
    _same(result, held_karp(tsp.cities(int(argv[0]), int(argv[1]))))


def _sat(argv: Sequence[str], result: Any) -> None:
    assert argv[0] == "random", "only random formulas have a reference here"
    variables, seed = int(argv[1]), int(argv[2])
    clauses = sat.random_3sat(variables, seed)
    if result["sat"]:
        model = set(result["model"])
        unsatisfied = [c for c in clauses if not model & set(c)]
        assert not unsatisfied, f"the model leaves {unsatisfied[:3]} unsatisfied"
        assert all((v in model) != (-v in model) for v in range(1, variables + 1))
    else:
        assert variables <= 22, "an UNSAT answer is checked by brute force up to 22 variables"
        assert not independent.satisfiable(list(clauses), variables), "satisfiable, not UNSAT"


def _search(argv: Sequence[str], result: Any) -> None:
    depth, spec = search.parse(argv)
    branching, seed, work, pivot = spec
    path = tuple(result["path"])
    assert len(path) == depth and all(0 <= i < branching for i in path), path
    assert search.evaluate(path, seed, work) == result["score"], "the leaf scores otherwise"
    assert result["needle"] == (result["score"] >= pivot)
    if not result["needle"]:
        # No needle claimed: there must be none, and the score is the tree's best.
        full = search.sequential((), depth, spec)
        assert full.score < pivot and full.score == result["score"], full.score


def _othello(argv: Sequence[str], result: Any) -> None:
    p, o, depth = othello.parse(argv)
    _same(result["value"], othello.negamax(p, o, depth))


def _raytracer(argv: Sequence[str], result: Any) -> None:
    pixels = raytracer.PLUGIN.entry(*raytracer.PLUGIN.parse_args(list(argv[:2])))
    _same(result, raytracer.report(list(argv[:2]), pixels))


def _barneshut(argv: Sequence[str], result: Any) -> None:
    n, steps, seed, _ = barneshut.parse(argv)
    pos, vel, masses = barneshut.initial(n, seed)
    for _ in range(steps):
        tree = barneshut.build(pos, masses)
        pos, vel = barneshut.move(pos, vel, barneshut.accel_range(0, n, pos, tree))
    _same(result, barneshut.summary(pos))


def _kmeans(argv: Sequence[str], result: Any) -> None:
    state, _ = kmeans.sequential(kmeans.parse(argv))
    _same(result, kmeans.report(argv, state))


def _heat2d(argv: Sequence[str], result: Any) -> None:
    rows, cols, iterations = heat2d.parse(argv)[:3]
    _same(result, heat2d.report(argv, _heat.sequential(rows, cols, iterations)))


def _same(got: Any, expected: Any) -> None:
    assert got == expected, f"{got!r} where an independent computation gives {expected!r}"


VERIFY: dict[str, Callable[[Sequence[str], Any], None]] = {
    "fib": _fib,
    "nqueens": _nqueens,
    "tree": _tree,
    "knapsack": _knapsack,
    "tsp": _tsp,
    "sat": _sat,
    "search": _search,
    "othello": _othello,
    "raytracer": _raytracer,
    "barneshut": _barneshut,
    "kmeans": _kmeans,
    "heat2d": _heat2d,
}


def verify(plugin: str, argv: Sequence[str], result: Any) -> None:
    """Raises AssertionError, saying what differs, when ``result`` (a run's JSON "result")
    is not the answer of ``plugin`` on ``argv``."""
    VERIFY[plugin](list(argv), result)
