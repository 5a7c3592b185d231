"""What a built-in plugin's answer must be, found without satind: the end-to-end crash tests
and `benchmarks/crashes.py` compare a run's JSON result with these, not only with the
plugin's own check.

Where an independent algorithm exists it is used (tests/independent.py: brute force, dynamic
programming, a different search); where the answer is a certificate (a SAT model, a needle)
it is verified; otherwise the plugin's code runs sequentially, outside any runtime (plain
calls: a spawn runs at once), which is what a distributed run must reproduce.
"""

from __future__ import annotations

import functools
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
    # Held-Karp's dynamic programming over subsets, not the run's branch and bound (and
    # fast enough here up to 18 cities: 17 take about 0.4 s).
    _same(result, tsp.held_karp(tsp.distances(tsp.cities(int(argv[0]), int(argv[1])))))


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
    # A plain sequential alpha-beta (plain negamax takes minutes past depth 5).
    p, o, depth = othello.parse(argv)
    _same(result["value"], othello.plain_alphabeta(p, o, depth, -othello.INF, othello.INF))


@functools.cache
def _barneshut_reference(n: int, steps: int, seed: int) -> Any:
    pos, vel, masses = barneshut.initial(n, seed)
    for _ in range(steps):
        tree = barneshut.build(pos, masses)
        pos, vel = barneshut.move(pos, vel, barneshut.accel_range(0, n, pos, tree))
    return barneshut.summary(pos)


def _barneshut(argv: Sequence[str], result: Any) -> None:
    n, steps, seed, _ = barneshut.parse(argv)
    _same(result, _barneshut_reference(n, steps, seed))


@functools.cache
def _sequential_report(plugin: str, argv: tuple[str, ...]) -> Any:
    """The report of a run of the plugin's own code, sequentially and outside any runtime
    (kept: the crash cases compare two runs with the same arguments)."""
    if plugin == "raytracer":
        return raytracer.report(list(argv[:2]), raytracer.PLUGIN.entry(*raytracer.parse(argv[:2])))
    if plugin == "kmeans":
        return kmeans.report(argv, kmeans.sequential(kmeans.parse(argv))[0])
    rows, cols, iterations = heat2d.parse(argv)[:3]
    return heat2d.report(argv, _heat.sequential(rows, cols, iterations))


def _raytracer(argv: Sequence[str], result: Any) -> None:
    _same(result, _sequential_report("raytracer", tuple(argv)))


def _kmeans(argv: Sequence[str], result: Any) -> None:
    _same(result, _sequential_report("kmeans", tuple(argv)))


def _heat2d(argv: Sequence[str], result: Any) -> None:
    _same(result, _sequential_report("heat2d", tuple(argv)))


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
