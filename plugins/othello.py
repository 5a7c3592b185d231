"""othello DEPTH [SEED]: the game-tree value of an Othello position, by parallel alpha-beta.

The position is the opening after 4 random plies chosen by SEED (default 1). Its value is
the negamax value DEPTH plies deep (a disc-and-corner evaluation at the horizon, the final
disc difference times 1000 when the game ends), for the side to move.

The search is alpha-beta with the "young brothers wait" rule: a node searches its first
(best-ordered) child alone, then spawns the others with the bound that child gave —
speculatively, because one of them may refute the node (a cut-off). Every child returns its
value through an exception, ``Score`` (a registered type, so it crosses peers as itself),
handled by an inlet in its parent's frame: the inlet raises the node's bound, and at a
cut-off (the value reaches beta) it aborts the node's other children, wherever they run
(satin-grid-programming-model §3.3, §4.3, §5.2.4). Below SEQ_DEPTH plies from the horizon a
node searches sequentially, with a transposition table local to each peer (a process-wide
dict: peers never share it) for move ordering and bounds.

The root is searched with the full window, so its value is exact whatever the schedule and
whatever was aborted. The check computes it again independently: plain negamax without any
pruning or table up to depth 4, a sequential alpha-beta without a table beyond.

Result: ``{"value", "move"}``: the root's value and a best move ("d3" style).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from satind import Plugin, abort, register_type, spawnable, sync

from ._args import at_most, int_arg

SEQ_DEPTH = 3
OPENING_PLIES = 4
TT_MAX = 1 << 18
INF = 1 << 30
FULL = (1 << 64) - 1
NOT_A = 0xFEFEFEFEFEFEFEFE  # every square but column a (col 0)
NOT_H = 0x7F7F7F7F7F7F7F7F  # every square but column h (col 7)
CORNERS = (1 << 0) | (1 << 7) | (1 << 56) | (1 << 63)
# square = row * 8 + col; bit 1 << square.
START = ((1 << 28) | (1 << 35), (1 << 27) | (1 << 36))  # (to move: black, other: white)


class Score(Exception):
    """A node's value for the side to move there, and its best move (-1: none)."""

    def __init__(self, value: int, move: int = -1) -> None:
        super().__init__(f"value {value}")
        self.value = value
        self.move = move


register_type(Score, 40030, lambda s: [s.value, s.move], lambda v: Score(v[0], v[1]))


# -- the board -----------------------------------------------------------------------------------


def _shifts(b: int) -> tuple[int, ...]:
    """``b`` moved one square in each of the 8 directions."""
    return (
        (b << 1) & NOT_A,  # east
        (b >> 1) & NOT_H,  # west
        (b << 8) & FULL,  # south
        b >> 8,  # north
        (b << 9) & NOT_A & FULL,  # south-east
        (b << 7) & NOT_H & FULL,  # south-west
        (b >> 7) & NOT_A,  # north-east
        (b >> 9) & NOT_H,  # north-west
    )


def _shift(b: int, d: int) -> int:
    return _shifts(b)[d]


def moves(p: int, o: int) -> int:
    """The squares where the side with discs ``p`` may play, as a bit set."""
    empty = FULL ^ (p | o)
    out = 0
    for d in range(8):
        x = _shift(p, d) & o
        for _ in range(5):
            x |= _shift(x, d) & o
        out |= _shift(x, d) & empty
    return out


def play(p: int, o: int, square: int) -> tuple[int, int]:
    """The position after the side to move (``p``) plays ``square``: (to move, other)."""
    m = 1 << square
    flips = 0
    for d in range(8):
        run = 0
        x = _shift(m, d)
        while x & o:
            run |= x
            x = _shift(x, d)
        if x & p:
            flips |= run
    return o & ~flips, p | m | flips


def squares(bits: int) -> list[int]:
    out = []
    while bits:
        low = bits & -bits
        out.append(low.bit_length() - 1)
        bits ^= low
    return out


def evaluate(p: int, o: int) -> int:
    """The horizon's value for the side to move: discs, corners weigh 16."""
    return (p.bit_count() - o.bit_count()) + 16 * (
        (p & CORNERS).bit_count() - (o & CORNERS).bit_count()
    )


def final(p: int, o: int) -> int:
    return 1000 * (p.bit_count() - o.bit_count())


def opening(seed: int) -> tuple[int, int]:
    rng = random.Random(seed)
    p, o = START
    for _ in range(OPENING_PLIES):
        legal = squares(moves(p, o))
        p, o = play(p, o, rng.choice(legal))
    return p, o


def name(square: int) -> str:
    return "abcdefgh"[square % 8] + str(square // 8 + 1) if square >= 0 else "pass"


# -- the sequential search, with a table local to the peer ------------------------------------

EXACT, LOWER, UPPER = 0, 1, 2
_TABLE: dict[tuple[int, int], tuple[int, int, int, int]] = {}  # (p, o) -> depth, value, kind, move


def _ordered(p: int, o: int, legal: list[int]) -> list[int]:
    """Moves, the table's best first, then corners, then the rest."""
    known = _TABLE.get((p, o))
    first = known[3] if known is not None else -1
    return sorted(legal, key=lambda s: (s != first, not (1 << s) & CORNERS, s))


def alphabeta(p: int, o: int, depth: int, alpha: int, beta: int) -> tuple[int, int]:
    """(value, best move) by sequential alpha-beta, fail-soft, with the local table."""
    key = (p, o)
    known = _TABLE.get(key)
    # Only an entry of the same depth: a deeper one would give a different (better) value
    # than a search of this depth, and the answer must be the depth-limited value exactly
    # (the table outlives runs, which may have other depths).
    if known is not None and known[0] == depth:
        _, value, kind, move = known
        if kind == EXACT or (kind == LOWER and value >= beta) or (kind == UPPER and value <= alpha):
            return value, move
    legal = squares(moves(p, o))
    if not legal:
        if not moves(o, p):
            return final(p, o), -1
        value, _ = alphabeta(o, p, depth, -beta, -alpha)  # a pass: same depth
        return -value, -1
    if depth == 0:
        return evaluate(p, o), -1
    best, best_move, low = -INF, legal[0], alpha
    for square in _ordered(p, o, legal):
        q, r = play(p, o, square)
        value = -alphabeta(q, r, depth - 1, -beta, -low)[0]
        if value > best:
            best, best_move = value, square
            low = max(low, value)
            if low >= beta:
                break
    kind = LOWER if best >= beta else UPPER if best <= alpha else EXACT
    if len(_TABLE) >= TT_MAX:
        _TABLE.clear()  # bounded: a full table starts over
    _TABLE[key] = (depth, best, kind, best_move)
    return best, best_move


# -- the parallel search ------------------------------------------------------------------------


@spawnable
def node(p: int, o: int, depth: int, alpha: int, beta: int) -> None:
    """Raises the Score of this position searched ``depth`` plies with window (alpha, beta)."""
    if depth <= SEQ_DEPTH:
        raise Score(*alphabeta(p, o, depth, alpha, beta))
    legal = squares(moves(p, o))
    if not legal:
        if not moves(o, p):
            raise Score(final(p, o))
        value, _ = _pass(o, p, depth, -beta, -alpha)  # a pass: same depth
        raise Score(-value)
    order = _ordered(p, o, legal)
    best, best_move, low = -INF, order[0], alpha

    def inlet(exc: Exception, square: int) -> None:
        nonlocal best, best_move, low
        if not isinstance(exc, Score):
            raise exc
        value = -exc.value
        if value > best:
            best, best_move = value, square
            low = max(low, value)
            if low >= beta:
                abort()  # a cut-off: the speculative brothers are useless

    def on(square: int) -> Callable[[Exception], None]:
        return lambda exc: inlet(exc, square)

    # The eldest brother first, alone: its value bounds the others' windows.
    q, r = play(p, o, order[0])
    node.spawn_inlet(on(order[0]), q, r, depth - 1, -beta, -low)
    sync()
    if low < beta:
        for square in order[1:]:
            q, r = play(p, o, square)
            node.spawn_inlet(on(square), q, r, depth - 1, -beta, -low)
        sync()
    raise Score(best, best_move)


def _pass(p: int, o: int, depth: int, alpha: int, beta: int) -> tuple[int, int]:
    """Search a position after a pass, in this frame (a plain call catches its Score)."""
    try:
        node(p, o, depth, alpha, beta)
    except Score as score:
        return score.value, score.move
    raise AssertionError("node returned without a Score")


@spawnable
def solve(p: int, o: int, depth: int) -> list[int]:
    """The run's root: [value, best move] with the full window."""
    value, move = _pass(p, o, depth, -INF, INF)
    return [value, move]


# -- the independent check ----------------------------------------------------------------------


def negamax(p: int, o: int, depth: int) -> int:
    """Plain negamax: no pruning, no table (the check on small depths)."""
    legal = squares(moves(p, o))
    if not legal:
        if not moves(o, p):
            return final(p, o)
        return -negamax(o, p, depth)
    if depth == 0:
        return evaluate(p, o)
    return max(-negamax(*play(p, o, s), depth - 1) for s in legal)


def plain_alphabeta(p: int, o: int, depth: int, alpha: int, beta: int) -> int:
    """Sequential alpha-beta without a table (the check on larger depths)."""
    legal = squares(moves(p, o))
    if not legal:
        if not moves(o, p):
            return final(p, o)
        return -plain_alphabeta(o, p, depth, -beta, -alpha)
    if depth == 0:
        return evaluate(p, o)
    best = -INF
    for square in legal:
        value = -plain_alphabeta(*play(p, o, square), depth - 1, -beta, -max(alpha, best))
        best = max(best, value)
        if best >= beta:
            break
    return best


def check(args: tuple[Any, ...], result: list[int]) -> None:
    p, o, depth = args
    value, move = result
    expected = negamax(p, o, depth) if depth <= 4 else plain_alphabeta(p, o, depth, -INF, INF)
    if value != expected:
        raise AssertionError(f"value {value}, the sequential search says {expected}")
    if move >= 0:
        after = -plain_alphabeta(*play(p, o, move), depth - 1, -INF, INF)
        if after != value:
            raise AssertionError(f"move {name(move)} is worth {after}, not {value}")


def parse(argv: Sequence[str]) -> tuple[int, int, int]:
    at_most(argv, 2)
    depth = int_arg(argv, 0, "DEPTH", low=1, high=12)
    seed = int_arg(argv, 1, "SEED", low=0, high=2**63, default=1)
    p, o = opening(seed)
    return p, o, depth


def report(argv: Sequence[str], result: list[int]) -> dict[str, Any]:
    return {"value": result[0], "move": name(result[1])}


PLUGIN = Plugin(
    name="othello",
    entry=solve,
    usage="othello DEPTH [SEED]",
    parse=parse,
    max_branching=32,
    check=check,
    report=report,
    description="Othello game-tree value by parallel alpha-beta; cut-offs abort speculation",
)
