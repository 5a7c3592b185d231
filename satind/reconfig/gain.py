"""The IOS reconfiguration policy (mpi-ios-reconfigurable-iterative-apps §5): the predicted
gain Γ of migrating a set of entities P from the local node l to the foreign node f that asked
for work.

For each resource r (CPU, network bandwidth, network latency, ...), with weight ω(r, P) — its
importance to P, the weights summing to 1 —

    Δ(r) = (a(r, f) - u(r, l, P)) / (a(r, f) + u(r, l, P))                        (1)
    Γ    = Σ_r ω(r, P) Δ(r)  -  M(P, l, f) / (10 + log L(P))                        (2)

where a(r, f) is the amount of r available at f, u(r, l, P) the amount P uses at l, M the
estimated cost of the migration and L(P) the entities' remaining life expectancy — for an
iterative application, the remaining iterations times the mean iteration time here. P
migrates when Γ > 0.

The paper leaves open the unit of M and L and the base of the logarithm. Here both are in
seconds and the logarithm is natural (``log_base``, a parameter); L below one second counts
as one (a log below zero would reward migrating entities about to end). Resources whose
available and used amounts are both zero add nothing (Δ would be 0/0).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Decision:
    """Γ and its parts, for the log and the status."""

    gain: float
    benefit: float  # Σ ω Δ
    cost: float  # M / (10 + log L)

    @property
    def migrate(self) -> bool:
        return self.gain > 0


def delta(available: float, used: float) -> float:
    """Equation 1 for one resource: in [-1, 1], positive when f has more than P uses here."""
    if available + used <= 0:
        return 0.0
    return (available - used) / (available + used)


def gain(
    weights: Mapping[str, float],
    available: Mapping[str, float],
    used: Mapping[str, float],
    migration_s: float,
    life_s: float,
    log_base: float = math.e,
) -> Decision:
    """Equation 2.

    Raises:
        ValueError: weights outside [0, 1] or not summing to 1, a negative amount, cost or
            life expectancy.
    """
    if any(not 0 <= w <= 1 for w in weights.values()) or not math.isclose(
        sum(weights.values()), 1.0, abs_tol=1e-9
    ):
        raise ValueError(f"resource weights must be in [0, 1] and sum to 1, got {dict(weights)}")
    if migration_s < 0 or life_s < 0:
        raise ValueError("migration cost and life expectancy must not be negative")
    if any(v < 0 for v in (*available.values(), *used.values())):
        raise ValueError("resource amounts must not be negative")
    benefit = sum(w * delta(available.get(r, 0.0), used.get(r, 0.0)) for r, w in weights.items())
    cost = migration_s / (10 + math.log(max(life_s, 1.0), log_base))
    return Decision(benefit - cost, benefit, cost)


def comm_s(
    at: str,
    holders: Iterable[str],
    one_way_s: Callable[[str, str], float],
    bytes_each: float,
    bandwidth: Callable[[str, str], float],
) -> float:
    """Seconds per iteration an entity placed ``at`` spends exchanging ghosts with the
    neighbours ``holders`` hold (IOS's communication profile: the entity's exchange graph):
    a neighbour on the same node costs nothing, any other its one-way latency plus its bytes
    over the bandwidth between the two (bytes per second)."""
    return sum(one_way_s(at, h) + bytes_each / bandwidth(at, h) for h in holders if h != at)


def entity_gain(
    cpu_here: float,
    cpu_there: float,
    step_s: float,
    comm_here_s: float,
    comm_there_s: float,
    migration_s: float,
    life_s: float,
    log_base: float = math.e,
) -> Decision:
    """Γ of moving one entity, with IOS's resources CPU and network (equation 2), each
    weighted by what the entity's iteration spends on it: ω(net) = its communication time
    (the larger of here and there, so that leaving colocated neighbours counts) over that
    plus its step time, ω(cpu) the rest. For the network less is more: Δ(net) =
    (here - there) / (here + there), so the amounts go into equation 1 the other way round."""
    comm = max(comm_here_s, comm_there_s)
    w_net = comm / (comm + step_s) if comm + step_s > 0 else 0.0
    return gain(
        {"cpu": 1.0 - w_net, "net": w_net},
        {"cpu": cpu_there, "net": comm_here_s},
        {"cpu": cpu_here, "net": comm_there_s},
        migration_s,
        life_s,
        log_base,
    )
