"""nqueens N [DEPTH]: the number of ways to place N non-attacking queens on an N x N board.

Rows are filled top-down. The first DEPTH rows are spawned, one job per safe square; below
them a job counts its subtree with the classic bit-mask search, sequentially. The default
DEPTH (see ``default_depth``) gives a few hundred to a few thousand jobs: enough to balance
several peers, few enough that spawning costs under 1% of the search.
"""

from __future__ import annotations

from collections.abc import Sequence

from satind import NotChecked, Plugin, spawnable, sync

from ._args import at_most, int_arg

# Solutions for N = 0..20 (OEIS A000170): the independent check.
KNOWN = (
    1,
    1,
    0,
    0,
    2,
    10,
    4,
    40,
    92,
    352,
    724,
    2680,
    14200,
    73712,
    365596,
    2279184,
    14772512,
    95815104,
    666090624,
    4968057848,
    39029188884,
)


def default_depth(n: int) -> int:
    return max(1, min(3, n - 6))


def count_seq(n: int, cols: int, d1: int, d2: int) -> int:
    """Solutions below a partial placement, as bit masks of the attacked columns/diagonals."""
    full = (1 << n) - 1
    if cols == full:
        return 1
    total = 0
    free = full & ~(cols | d1 | d2)
    while free:
        bit = free & -free
        free ^= bit
        total += count_seq(n, cols | bit, ((d1 | bit) << 1) & full, (d2 | bit) >> 1)
    return total


@spawnable
def queens(n: int, cols: int, d1: int, d2: int, depth: int) -> int:
    full = (1 << n) - 1
    if depth == 0 or cols == full:
        return count_seq(n, cols, d1, d2)
    handles = []
    free = full & ~(cols | d1 | d2)
    while free:
        bit = free & -free
        free ^= bit
        handles.append(
            queens.spawn(n, cols | bit, ((d1 | bit) << 1) & full, (d2 | bit) >> 1, depth - 1)
        )
    sync()
    return sum(h.result() for h in handles)


def parse(argv: Sequence[str]) -> tuple[int, int, int, int, int]:
    at_most(argv, 2)
    n = int_arg(argv, 0, "N", low=1, high=32)
    depth = int_arg(argv, 1, "DEPTH", low=0, high=n, default=default_depth(n))
    return n, 0, 0, 0, depth


def check(args: tuple[int, ...], result: int) -> None:
    n = args[0]
    if n >= len(KNOWN):
        raise NotChecked(f"the check knows the counts up to {len(KNOWN) - 1} queens")
    if result != KNOWN[n]:
        raise AssertionError(f"{n}-queens has {KNOWN[n]} solutions, not {result}")


def benchmark() -> None:
    """The same search on a small board (9 queens: ~3 ms), for self-adaptivity's speed."""
    count_seq(9, 0, 0, 0)


PLUGIN = Plugin(
    name="nqueens",
    entry=queens,
    usage="nqueens N [DEPTH]",
    parse=parse,
    max_branching=lambda args: args[0],
    check=check,
    description="count the solutions of the N-queens problem",
    benchmark=benchmark,
)
