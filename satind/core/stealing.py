"""Victim choice and pacing: Random Stealing and Cluster-aware Random Stealing, as pure code.

RS (Blumofe and Leiserson): an idle peer steals from a peer chosen uniformly at random and
waits for the answer; with C clusters, (C-1)/C of its requests cross the wide area.

CRS (satin-grid-programming-model §4.1.2): an idle peer sends one *asynchronous* steal request
to a random peer in another cluster and, while that request is out, steals synchronously from
random peers in its own cluster. It never has more than one wide-area request in flight, so
wide-area latency is overlapped with local stealing instead of being waited for.

Everything here is a synchronous function of plain data and a seeded ``random.Random``: the
peer's trio loop and the simulator drive the same code.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

from satind.config import StealAlgorithm, StealConfig
from satind.work.rng import Rng


@dataclass(frozen=True)
class Candidates:
    """Other members an idle peer may steal from, split by cluster."""

    local: tuple[str, ...]
    remote: tuple[str, ...]

    @property
    def everyone(self) -> tuple[str, ...]:
        return self.local + self.remote


def candidates(me: str, my_cluster: str, members: Sequence[tuple[str, str]]) -> Candidates:
    """Split ``(name, cluster)`` pairs into local and remote victims, leaving out ``me``."""
    local = tuple(name for name, cluster in members if cluster == my_cluster and name != me)
    remote = tuple(name for name, cluster in members if cluster != my_cluster)
    return Candidates(local, remote)


@dataclass(frozen=True)
class StealPlan:
    """What to do in one steal round.

    ``wide``: send an asynchronous wide-area request to this peer (CRS only), or None.
    ``sync``: steal from this peer and wait for the answer, or None (nobody to ask).
    ``sync_is_wide``: the synchronous victim is in another cluster (RS does that).
    """

    wide: str | None
    sync: str | None
    sync_is_wide: bool


def plan_round(
    algorithm: StealAlgorithm,
    rng: Rng,
    victims: Candidates,
    wide_in_flight: bool,
) -> StealPlan:
    """Choose the victims of one steal round."""
    if algorithm == "rs":
        if not victims.everyone:
            return StealPlan(None, None, False)
        victim = rng.choice(victims.everyone)
        return StealPlan(None, victim, victim in victims.remote)
    wide = None
    if not wide_in_flight and victims.remote:
        wide = rng.choice(victims.remote)
    sync = rng.choice(victims.local) if victims.local else None
    return StealPlan(wide, sync, False)


def backoff_delay(cfg: StealConfig, failures: int) -> float:
    """Pause after ``failures`` failed rounds in a row: none at first, then doubling to a cap.

    Retrying at once keeps load balancing fast when work is about to appear; backing off
    keeps idle thieves from stealing CPU from the peers that work (2 cores, several peers).
    """
    if failures < cfg.backoff_after:
        return 0.0
    doublings = min(failures - cfg.backoff_after, 30)
    return float(min(cfg.backoff_max_s, cfg.backoff_min_s * (2**doublings)))


# Upper bounds (seconds) of the steal round-trip histogram buckets; the last bucket is open.
# Buckets, unlike a median, add up across peers.
RTT_BUCKETS_S = (
    0.0001,
    0.0002,
    0.0003,
    0.0005,
    0.00075,
    0.001,
    0.0015,
    0.002,
    0.003,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
)


RTT_SUM = "steal_rtt_sum_s"


def rtt_bucket_names() -> list[str]:
    names = [f"steal_rtt_le_{bound * 1000:g}ms" for bound in RTT_BUCKETS_S]
    return [*names, f"steal_rtt_gt_{RTT_BUCKETS_S[-1] * 1000:g}ms"]


def rtt_median_s(hist: list[float]) -> float | None:
    """Median round trip from histogram counts, interpolated inside its bucket."""
    total = sum(hist)
    if total == 0:
        return None
    half = total / 2
    seen = 0.0
    low = 0.0
    for bound, count in zip(RTT_BUCKETS_S, hist, strict=False):
        if count and seen + count >= half:
            return low + (bound - low) * (half - seen) / count
        seen += count
        low = bound
    return RTT_BUCKETS_S[-1]


@dataclass
class StealCounters:
    """Counters of this peer's stealing (names are those of the run JSON ``stats``)."""

    steal_attempts_local: int = 0
    steal_attempts_wide: int = 0
    stolen_local: int = 0
    stolen_wide: int = 0
    # Victim side: jobs other peers took from this peer's queue.
    jobs_given: int = 0
    # Jobs stolen from this peer by a member that died or left, put back in our queue.
    jobs_restarted: int = 0
    rtt_hist: list[int] = field(default_factory=lambda: [0] * (len(RTT_BUCKETS_S) + 1))
    # Their sum, for the Prometheus histogram's _sum (a mean rate of round-trip time).
    rtt_sum_s: float = 0.0

    def record_rtt(self, seconds: float) -> None:
        self.rtt_hist[bisect.bisect_left(RTT_BUCKETS_S, seconds)] += 1
        self.rtt_sum_s += seconds

    def as_dict(self) -> dict[str, float]:
        out: dict[str, float] = {
            "steal_attempts_local": self.steal_attempts_local,
            "steal_attempts_wide": self.steal_attempts_wide,
            "stolen_local": self.stolen_local,
            "stolen_wide": self.stolen_wide,
            "jobs_given": self.jobs_given,
            "jobs_restarted": self.jobs_restarted,
        }
        out.update(zip(rtt_bucket_names(), self.rtt_hist, strict=True))
        out[RTT_SUM] = self.rtt_sum_s
        return out
