"""The availability model of scheduling-iterative-apps-volatile-resources §5: each worker is a
3-state Markov chain over time slots — UP, RECLAIMED (suspended by its owner, work kept) and
DOWN (program, data and partial results lost) — and the quantities the heuristics rank
workers by: P₊ (Lemma 1), E(W) (Theorem 2), the steady state π and P_UD (§6.3.3).

The paper's derivation of Theorem 2 writes ``z = P_ur P_ru / (P_rr (1 - P_rr))`` on the way;
redone, the intermediate quantity has P_uu where it has P_rr, and the theorem as stated is the
right one (tests/volatile/test_volatile.py checks it against a Monte Carlo simulation).

Estimation: a scheduler on real machines does not know the chains. ``Estimator`` counts each
worker's observed transitions, one per observed slot, and blends them with a prior chain
worth ``prior_slots`` observations per row (the paper is silent; a prior keeps a worker seen
for a few slots from looking perfectly reliable).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import random  # the type of the generator a caller hands over, seeded

UP, RECLAIMED, DOWN = 0, 1, 2
STATES = ("up", "reclaimed", "down")

Matrix = tuple[tuple[float, float, float], tuple[float, float, float], tuple[float, float, float]]


@dataclass(frozen=True)
class Chain:
    """A worker's transition matrix: ``p[i][j]`` is the probability of moving from state i in
    one slot to state j in the next (states UP, RECLAIMED, DOWN)."""

    p: Matrix

    @staticmethod
    def symmetric(stay: tuple[float, float, float]) -> Chain:
        """The study's chains (§7): ``stay[x]`` = P_xx, and P_xy = (1 - P_xx) / 2."""
        rows = tuple(
            tuple(stay[i] if i == j else (1 - stay[i]) / 2 for j in range(3)) for i in range(3)
        )
        return Chain(rows)  # type: ignore[arg-type]

    def p_plus(self) -> float:
        """Lemma 1: the probability that a worker UP now is UP again at a later slot without
        going DOWN in between."""
        (uu, ur, _), (ru, rr, _), _ = self.p
        if rr >= 1:
            return uu
        return uu + ur * ru / (1 - rr)

    def expected_time(self, w: float) -> float:
        """Theorem 2: the expected number of slots a worker UP now needs to be UP for ``w``
        slots, given that it does not go DOWN before (reclaimed slots counted)."""
        if w <= 1:
            return max(w, 0.0)
        (uu, ur, _), (ru, rr, _), _ = self.p
        a = ur * ru
        denominator = (1 - rr) * (uu * (1 - rr) + a)
        if denominator <= 0:
            return math.inf if a > 0 else float(w)
        return w + (w - 1) * a / denominator

    def stationary(self) -> tuple[float, float, float]:
        """π: the steady-state fractions of slots UP, RECLAIMED and DOWN."""
        return _stationary(self.p)

    def p_ud(self, k: float) -> float:
        """§6.3.3's approximation of the probability that a worker UP now does not go DOWN
        during ``k`` slots (its state forgotten after the first transition)."""
        (_, _, ud), (_, _, rd), _ = self.p
        pi_u, pi_r, _ = self.stationary()
        if pi_u + pi_r <= 0:
            return 0.0
        per_slot = 1 - (ud * pi_u + rd * pi_r) / (pi_u + pi_r)
        return float((1 - ud) * per_slot ** max(k - 2, 0))

    def p_ud_exact(self, k: int) -> float:
        """The same without the approximation: [1 1] · Q^(k-1) · [1 0]ᵀ with Q the UP/RECLAIMED
        block of the matrix."""
        (uu, ur, _), (ru, rr, _), _ = self.p
        vu, vr = 1.0, 0.0  # the distribution over (UP, RECLAIMED), started UP
        for _ in range(max(k - 1, 0)):
            vu, vr = vu * uu + vr * ru, vu * ur + vr * rr
        return vu + vr

    def step(self, state: int, rng: random.Random) -> int:
        row = self.p[state]
        x = rng.random()
        if x < row[0]:
            return UP
        return RECLAIMED if x < row[0] + row[1] else DOWN


@functools.lru_cache(maxsize=4096)
def _stationary(p: Matrix) -> tuple[float, float, float]:
    """Chain.stationary, kept per matrix (heuristics ask for it at every plan)."""
    # Solve π P = π, Σπ = 1 by Cramer's rule on two balance equations and the sum.
    a = [
        [p[0][0] - 1, p[1][0], p[2][0]],
        [p[0][1], p[1][1] - 1, p[2][1]],
        [1.0, 1.0, 1.0],
    ]
    b = [0.0, 0.0, 1.0]
    det = _det(a)
    if abs(det) < 1e-15:
        return (1 / 3, 1 / 3, 1 / 3)  # not irreducible: no unique steady state
    out = []
    for col in range(3):
        m = [row[:] for row in a]
        for r in range(3):
            m[r][col] = b[r]
        out.append(_det(m) / det)
    return (out[0], out[1], out[2])


def _det(m: list[list[float]]) -> float:
    return (
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
        - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    )


# The prior of ``Estimator``: what a worker never observed is taken to be (the middle of the
# study's range, P_xx = 0.95).
PRIOR = Chain.symmetric((0.95, 0.95, 0.95))


@dataclass
class Estimator:
    """A worker's chain estimated online from the states observed at successive slots."""

    prior: Chain = PRIOR
    prior_slots: float = 20.0
    counts: list[list[int]] = field(default_factory=lambda: [[0, 0, 0] for _ in range(3)])
    last: int | None = None

    def observed(self) -> int:
        """Transitions seen so far."""
        return sum(map(sum, self.counts))

    def observe(self, state: int) -> None:
        """The worker's state at the next slot."""
        if self.last is not None:
            self.counts[self.last][state] += 1
        self.last = state

    def chain(self) -> Chain:
        rows = []
        for i in range(3):
            total = sum(self.counts[i]) + self.prior_slots
            rows.append(
                tuple(
                    (self.counts[i][j] + self.prior_slots * self.prior.p[i][j]) / total
                    for j in range(3)
                )
            )
        return Chain(tuple(rows))  # type: ignore[arg-type]
