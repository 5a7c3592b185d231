"""search DEPTH BRANCHING SEED [WORK]: depth-first search for a needle, the shape of
satin-grid-programming-model Fig 2.

A tree of BRANCHING children per node, DEPTH levels deep; a leaf's score is a hash of SEED
and its path, costing WORK rounds of hashing to evaluate (the "node.evaluate()" of Fig 2). A
leaf is a *needle* when its score reaches the pivot, set so that about four leaves of the
tree are needles. Each node spawns its children with an inlet; a child returns its best
leaf by raising ``Result`` (a registered type: it crosses peers as itself); the inlet keeps
the best, and as soon as it reaches the pivot, aborts the node's other children — the rest of
the tree is not searched. Below SEQ_DEPTH levels from the leaves a node searches sequentially
and stops at its first needle too.

Result: ``{"score", "path", "needle"}``: a needle if the tree has one (which one depends on
the schedule), else the best leaf. The check recomputes the leaf's score from its path and,
when it is not a needle, walks the whole tree (up to 2,000,000 leaves times WORK) to confirm
that there is no needle and that it is the best.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from satind import NotChecked, Plugin, UsageError, abort, register_type, spawnable, sync

from ._args import at_most, int_arg

SEQ_DEPTH = 3
# Leaves times WORK the check walks at most to confirm that a tree has no needle.
CHECK_COST = 2_000_000
SCORE_BITS = 32


class Result(Exception):
    """The best leaf of a subtree: its score and path."""

    def __init__(self, score: int, path: Sequence[int]) -> None:
        super().__init__(f"score {score} at {list(path)}")
        self.score = score
        self.path = tuple(path)


register_type(Result, 40020, lambda r: [r.score, list(r.path)], lambda v: Result(v[0], v[1]))

Spec = tuple[int, int, int, int]  # (branching, seed, work, pivot)


def evaluate(path: Sequence[int], seed: int, work: int) -> int:
    """A leaf's score, after ``work`` rounds of hashing (the evaluation's cost)."""
    digest = hashlib.blake2b(bytes(path), digest_size=16, key=seed.to_bytes(8, "big")).digest()
    for _ in range(work):
        digest = hashlib.blake2b(digest, digest_size=16).digest()
    return int.from_bytes(digest[:4], "big")


def pivot_for(depth: int, branching: int) -> int:
    """The score about four of the tree's leaves reach."""
    leaves: int = branching**depth
    return max(0, (1 << SCORE_BITS) - ((1 << SCORE_BITS) * 4) // max(leaves, 1))


def sequential(path: tuple[int, ...], depth: int, spec: Spec) -> Result:
    """The best leaf below ``path``, stopping at the first needle."""
    branching, seed, work, pivot = spec
    if depth == 0:
        return Result(evaluate(path, seed, work), path)
    best = Result(-1, path)
    for i in range(branching):
        found = sequential((*path, i), depth - 1, spec)
        if found.score > best.score:
            best = found
            if best.score >= pivot:
                break
    return best


@spawnable
def dfs(path: tuple[int, ...], depth: int, spec: Spec) -> None:
    """Fig 2's depthFirstSearch: raises the subtree's Result."""
    if depth <= SEQ_DEPTH:
        raise sequential(path, depth, spec)
    pivot = spec[3]
    best = Result(-1, path)

    def inlet(result: Exception) -> None:
        nonlocal best
        if not isinstance(result, Result):
            raise result  # a real failure
        if result.score > best.score:
            best = result
            if best.score >= pivot:
                abort()  # a needle: the other children are useless

    for i in range(spec[0]):
        dfs.spawn_inlet(inlet, (*path, i), depth - 1, spec)
    sync()
    raise best


@spawnable
def find(depth: int, spec: Spec) -> list[Any]:
    """The run's root: [score, path] of a needle, or of the best leaf."""
    try:
        dfs((), depth, spec)  # a plain call: its spawns are this job's
    except Result as found:
        return [found.score, list(found.path)]
    raise AssertionError("dfs returned without a result")


def parse(argv: Sequence[str]) -> tuple[int, Spec]:
    at_most(argv, 4)
    depth = int_arg(argv, 0, "DEPTH", low=1, high=30)
    branching = int_arg(argv, 1, "BRANCHING", low=1, high=64)
    seed = int_arg(argv, 2, "SEED", low=0, high=2**63)
    work = int_arg(argv, 3, "WORK", low=0, high=10**7, default=200)
    if branching**depth > 10**12:
        raise UsageError(f"a tree of {branching}^{depth} leaves is too large (at most 10^12)")
    return depth, (branching, seed, work, pivot_for(depth, branching))


def check(args: tuple[Any, ...], result: list[Any]) -> None:
    depth, spec = args
    branching, seed, work, pivot = spec
    score, path = result[0], tuple(result[1])
    if len(path) != depth or any(not 0 <= i < branching for i in path):
        raise AssertionError(f"{list(path)} is not a leaf of the tree")
    if evaluate(path, seed, work) != score:
        raise AssertionError(f"the leaf at {list(path)} does not score {score}")
    if score >= pivot:
        return  # a needle, and any needle is right: its score is its certificate
    if branching**depth * max(work, 1) > CHECK_COST:
        raise NotChecked(
            f"no needle found in {branching}^{depth} leaves: the check walks the tree again "
            f"up to {CHECK_COST:,} leaves times WORK to confirm it has none"
        )
    full = sequential((), depth, spec)  # stops at a needle, if there is one
    if full.score >= pivot or full.score != score:
        raise AssertionError(f"score {score} is not the tree's best ({full.score})")


def report(argv: Sequence[str], result: list[Any]) -> dict[str, Any]:
    _, spec = parse(argv)
    return {"score": result[0], "path": result[1], "needle": result[0] >= spec[3]}


PLUGIN = Plugin(
    name="search",
    entry=find,
    usage="search DEPTH BRANCHING SEED [WORK]",
    parse=parse,
    max_branching=lambda args: int(args[1][0]),
    check=check,
    report=report,
    description="depth-first search for a needle; the first needle aborts the rest (Fig 2)",
)
