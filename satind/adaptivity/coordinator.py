"""The coordinator's decisions (satin-grid-programming-model §4.5), as pure functions.

Every period the coordinator has two samples of each peer's counters (``Sample``, at the
start and the end of the period) and turns them into one ``PeerPeriod`` each:

- overhead: the share of the period the peer's compute side did not compute (idle,
  stealing, blocked in a sync for a stolen child, or starved of the GIL by the network side:
  the paper's "idle or communicating");
- wide overhead: the share it spent waiting on wide-area steal round trips;
- speed: its machine's speed (1 / the CPU time of the run's plugin's own benchmark when every
  peer of the period timed it, else of a fixed Python loop) times the share of a CPU it got
  while it computed (CPU time over computing wall time: a machine shared with another
  program gives the peer less), relative to the fastest peer.

The weighted average efficiency is the paper's ``1/n * sum(speed_i * (1 - overhead_i))``. Then,
in this order, one decision per period:

1. a cluster whose peers spend on average more than ``cluster_overhead_max`` of the period
   waiting on wide-area steals is drained whole: its link is the bottleneck;
2. above ``e_max`` more peers are asked for, the more the higher the efficiency:
   ``ceil(n * (wa - e_max))``;
3. below ``e_min`` the least efficient peers are drained (lowest ``speed * (1 - overhead)``),
   the more the lower the efficiency: ``ceil(n * (e_min - wa))``.

A drain waits until ``confirm_periods`` periods in a row called for one (``confirm``): the last
stretch of a divide-and-conquer run, when the work runs out, is inefficient for a period or so,
and moving work then only costs. Each change is at most ``max_change`` peers, and never leaves
fewer than ``min_peers`` working. The coordinator never drains its own peer (the run's master)
or its cluster: a drained master hands its run over (core/drain.py), but a coordinator that
removes itself would lose its samples; an operator can still drain it by hand. These two rules,
the formulas for how many, and the cluster threshold are this implementation's choices: the
paper gives the direction ("the higher the efficiency, the more processors are requested") and
E_min/E_max, not the rest.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from satind.config import AdaptConfig


@dataclass(frozen=True)
class Sample:
    """One peer's counters at one moment (what it answers a ``LoadRequest`` with)."""

    name: str
    cluster: str
    at: float  # the coordinator's clock when the answer came
    idle_s: float
    wide_wait_s: float
    cpu_s: float
    bench_cpu_s: float
    standby: bool = False
    progress: float = 0.0  # its share of the run's progress (summed over peers: the run's)
    busy_s: float = 0.0  # seconds its compute side computed (adaptivity/measure.py)
    app_bench_cpu_s: float = 0.0  # the run's plugin's benchmark, in CPU seconds (0: none)
    # Alive, but its answer did not come in time (a saturated link, an overloaded machine):
    # counted as all overhead for the period, wide-area overhead when ``wide``.
    missing: bool = False
    wide: bool = False


@dataclass(frozen=True)
class PeerPeriod:
    name: str
    cluster: str
    speed: float  # relative to the fastest peer of the period, in (0, 1]
    overhead: float  # share of the period idle, in [0, 1]
    wide_overhead: float  # share of the period waiting on wide-area steals, in [0, 1]

    @property
    def useful(self) -> float:
        """Useful work done, weighted by speed: this peer's term of wa_efficiency."""
        return self.speed * (1.0 - self.overhead)


@dataclass(frozen=True)
class Decision:
    wa_efficiency: float
    add: int = 0
    drain: tuple[str, ...] = ()
    drain_cluster: str = ""
    why: str = ""
    # Periods in a row that called for a drain, this one included (see ``confirm``).
    shrink_streak: int = 0

    @property
    def shrinks(self) -> bool:
        return bool(self.drain or self.drain_cluster)


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


def periods(before: Mapping[str, Sample], after: Sequence[Sample]) -> list[PeerPeriod]:
    """One period per peer sampled at both ends (a peer that joined meanwhile waits for the
    next period; a standby peer does no work and is left out)."""
    raw: list[tuple[Sample, float, float, float]] = []
    silent = []
    for now in after:
        if now.missing:
            if now.name in before and not before[now.name].standby:
                silent.append(PeerPeriod(now.name, now.cluster, 1.0, 1.0, 1.0 if now.wide else 0.0))
            continue
        then = before.get(now.name)
        if then is None or now.standby or then.standby or then.missing:
            continue
        span = now.at - then.at
        if span <= 0:
            continue
        busy_s = min(span, max(0.0, now.busy_s - then.busy_s))
        overhead = 1.0 - busy_s / span
        wide = min(overhead, _clip((now.wide_wait_s - then.wide_wait_s) / span))
        # The CPU a peer got while it computed; a peer that hardly computed gives no
        # evidence: count it whole.
        share = _clip((now.cpu_s - then.cpu_s) / busy_s) if busy_s > 0.01 * span else 1.0
        raw.append((now, overhead, wide, max(share, 1e-3)))
    # The application's own benchmark when every peer timed it (the same work everywhere),
    # else the fixed loop: speeds are compared between peers, so one measure for all.
    app = bool(raw) and all(s.app_bench_cpu_s > 0 for s, *_ in raw)
    speeds = [
        share / max(s.app_bench_cpu_s if app else s.bench_cpu_s, 1e-9) for s, _, _, share in raw
    ]
    fastest = max(speeds, default=1.0)
    return [
        PeerPeriod(s.name, s.cluster, speed / fastest, overhead, wide)
        for (s, overhead, wide, _), speed in zip(raw, speeds, strict=True)
    ] + silent


def wa_efficiency(peers: Sequence[PeerPeriod]) -> float:
    """The paper's weighted average efficiency; 0 without peers."""
    if not peers:
        return 0.0
    return sum(p.useful for p in peers) / len(peers)


def confirm(decision: Decision, previous: Decision | None, cfg: AdaptConfig) -> Decision:
    """A drain goes ahead only when ``confirm_periods`` periods in a row called for one;
    until then the decision is to wait (with the streak counted)."""
    if not decision.shrinks:
        return decision
    streak = (previous.shrink_streak if previous is not None else 0) + 1
    if streak >= cfg.confirm_periods:
        return dataclasses.replace(decision, shrink_streak=streak)
    return Decision(
        decision.wa_efficiency,
        why=f"{decision.why}; waiting for {cfg.confirm_periods - streak} more period(s) to confirm",
        shrink_streak=streak,
    )


def decide(
    peers: Sequence[PeerPeriod], cfg: AdaptConfig, master: str, size: int = 0, done: float = 0.0
) -> Decision:
    """What to do after a period (see the module's docstring), before ``confirm``.
    ``size``: the working peers there are or will be (members, and peers asked for that have
    not joined yet), for ``max_peers``; at least the peers of the period. ``done``: the share
    of the run finished; from ``shrink_until`` on nothing is drained."""
    wa = wa_efficiency(peers)
    n = len(peers)
    if n == 0:
        return Decision(wa, why="no peer worked through the period")
    home = next((p.cluster for p in peers if p.name == master), "")
    clusters: dict[str, list[PeerPeriod]] = {}
    for p in peers:
        clusters.setdefault(p.cluster, []).append(p)
    late = done >= cfg.shrink_until
    if len(clusters) > 1 and not late:
        worst, overhead = max(
            ((c, sum(p.wide_overhead for p in ps) / len(ps)) for c, ps in clusters.items()),
            key=lambda item: (item[1], item[0]),
        )
        remaining = n - len(clusters[worst])
        if overhead > cfg.cluster_overhead_max and worst != home and remaining >= cfg.min_peers:
            return Decision(
                wa,
                drain_cluster=worst,
                why=f"cluster {worst} waits {overhead:.0%} of the time on wide-area steals "
                f"(threshold {cfg.cluster_overhead_max:.0%})",
            )
    room = cfg.max_peers - max(n, size) if cfg.max_peers else cfg.max_change
    if wa > cfg.e_max and room > 0:
        add = min(cfg.max_change, room, max(1, math.ceil(n * (wa - cfg.e_max))))
        return Decision(wa, add=add, why=f"efficiency {wa:.0%} above {cfg.e_max:.0%}")
    if wa < cfg.e_min and late:
        return Decision(wa, why=f"efficiency {wa:.0%}, but the run is {done:.0%} done: no drain")
    if wa < cfg.e_min:
        want = min(cfg.max_change, max(1, math.ceil(n * (cfg.e_min - wa))), n - cfg.min_peers)
        candidates = sorted(
            (p for p in peers if p.name != master), key=lambda p: (p.useful, p.name)
        )
        drain = tuple(p.name for p in candidates[: max(0, want)])
        if drain:
            return Decision(wa, drain=drain, why=f"efficiency {wa:.0%} below {cfg.e_min:.0%}")
    return Decision(wa, why=f"efficiency {wa:.0%} within [{cfg.e_min:.0%}, {cfg.e_max:.0%}]")
