"""The coordinator's decisions (adaptivity/coordinator.py) and what a peer measures
(adaptivity/measure.py), as case tables."""

from __future__ import annotations

import pytest

from satind.adaptivity.coordinator import (
    Decision,
    PeerPeriod,
    Sample,
    confirm,
    decide,
    periods,
    wa_efficiency,
)
from satind.adaptivity.measure import benchmark_cpu_s
from satind.adaptivity.utilization import Utilization
from satind.config import AdaptConfig

CFG = AdaptConfig(enabled=True)


def peers(spec: str) -> list[PeerPeriod]:
    """'c0:1.0:0.2:0.0 ...': cluster, speed, overhead, wide overhead for p0, p1, ..."""
    out = []
    for i, item in enumerate(spec.split()):
        cluster, speed, overhead, wide = item.split(":")
        out.append(PeerPeriod(f"p{i}", cluster, float(speed), float(overhead), float(wide)))
    return out


@pytest.mark.parametrize(
    "spec, cfg, expected",
    [
        # everyone busy: efficiency 1.0 > 0.5, ask for ceil(4 * 0.5) = 2 more
        ("c0:1:0:0 c0:1:0:0 c0:1:0:0 c0:1:0:0", CFG, Decision(1.0, add=2)),
        # within [0.3, 0.5]: nothing
        ("c0:1:0.6:0 c0:1:0.6:0", CFG, Decision(0.4)),
        # below 0.3 (0.2): drain ceil(2 * 0.1) = 1, the worst that is not the master p0
        ("c0:1:0.8:0 c0:1:0.8:0", CFG, Decision(0.2, drain=("p1",))),
        # the worst peers by speed * (1 - overhead) go first
        (
            "c0:1:0.9:0 c0:0.2:0.9:0 c0:1:0.8:0 c0:0.5:0.9:0",
            CFG,
            Decision((0.1 + 0.02 + 0.2 + 0.05) / 4, drain=("p1",)),
        ),
        # a cluster waiting on wide-area steals is drained whole before anything else
        (
            "c0:1:0:0 c0:1:0:0 c1:1:0.6:0.5 c1:1:0.6:0.5",
            CFG,
            Decision(0.7, drain_cluster="c1"),
        ),
        # ... but never the master's own cluster: then the efficiency decides
        ("c1:1:0.6:0.5 c1:1:0.6:0.5 c0:1:0:0 c0:1:0:0", CFG, Decision(0.7, add=1)),
        # a single cluster is never drained whole
        ("c1:1:0.9:0.9 c1:1:0.9:0.9", CFG, Decision(0.1, drain=("p1",))),
        # never fewer than min_peers
        ("c0:1:0.9:0 c0:1:0.9:0", AdaptConfig(min_peers=2), Decision(0.1)),
        # at most max_change at once
        (" ".join(["c0:1:0:0"] * 40), AdaptConfig(max_change=3), Decision(1.0, add=3)),
        (
            " ".join(["c0:1:0.95:0"] * 40),
            AdaptConfig(max_change=3),
            Decision(0.05, drain=("p1", "p10", "p11")),
        ),
        # never past max_peers
        (" ".join(["c0:1:0:0"] * 10), AdaptConfig(max_peers=12), Decision(1.0, add=2)),
        (" ".join(["c0:1:0:0"] * 12), AdaptConfig(max_peers=12), Decision(1.0)),
        # nobody worked through the period
        ("", CFG, Decision(0.0)),
    ],
)
def test_decide(spec: str, cfg: AdaptConfig, expected: Decision) -> None:
    got = decide(peers(spec), cfg, master="p0")
    assert got.wa_efficiency == pytest.approx(expected.wa_efficiency)
    assert (got.add, got.drain, got.drain_cluster) == (
        expected.add,
        expected.drain,
        expected.drain_cluster,
    )
    assert got.why


def sample(
    name: str,
    at: float,
    idle: float,
    cpu: float,
    bench: float = 0.01,
    *,
    busy: float | None = None,
    app: float = 0.0,
    wide: float = 0.0,
    cluster: str = "c0",
    standby: bool = False,
) -> Sample:
    """A peer's counters at ``at``; it computed all the time it was not idle unless
    ``busy`` says otherwise."""
    return Sample(
        name,
        cluster,
        at,
        idle,
        wide,
        cpu,
        bench,
        standby,
        busy_s=at - idle if busy is None else busy,
        app_bench_cpu_s=app,
    )


def test_periods_turn_two_samples_into_overhead_and_relative_speed() -> None:
    before = {
        "a": sample("a", 0.0, 0.0, 0.0),
        "b": sample("b", 0.0, 5.0, 3.0),
        "slow": sample("slow", 0.0, 0.0, 0.0, bench=0.02),
        "loaded": sample("loaded", 0.0, 0.0, 0.0),
        "standby": sample("standby", 0.0, 0.0, 0.0, standby=True),
    }
    after = [
        sample("a", 10.0, 0.0, 10.0),  # busy all the period, a whole CPU
        sample("b", 10.0, 7.0, 11.0, wide=0.0),  # idle 2 of 10 s
        sample("slow", 10.0, 0.0, 10.0, bench=0.02),  # a machine half as fast
        sample("loaded", 10.0, 0.0, 3.0),  # busy, but got 30% of a CPU
        sample("standby", 10.0, 10.0, 0.0, standby=True),
        sample("new", 10.0, 0.0, 10.0),  # joined during the period
    ]
    got = {p.name: p for p in periods(before, after)}
    assert set(got) == {"a", "b", "slow", "loaded"}
    assert got["a"].speed == pytest.approx(1.0) and got["a"].overhead == 0.0
    assert got["b"].overhead == pytest.approx(0.2) and got["b"].speed == pytest.approx(1.0)
    assert got["slow"].speed == pytest.approx(0.5)
    assert got["loaded"].speed == pytest.approx(0.3)
    assert wa_efficiency(list(got.values())) == pytest.approx((1 + 0.8 + 0.5 + 0.3) / 4)


def test_overhead_is_all_time_not_computing_not_only_idle_time() -> None:
    # Never idle (it always had work or a sync to wait in), but it computed 6 s of 10: the
    # rest went to waiting for stolen children's results, messages and the GIL.
    before = {"a": sample("a", 0.0, 0.0, 0.0, busy=0.0)}
    [got] = periods(before, [sample("a", 10.0, 0.0, 6.0, busy=6.0)])
    assert got.overhead == pytest.approx(0.4)
    assert got.speed == 1.0  # 6 CPU s in 6 s computing: a whole CPU


def test_the_plugins_own_benchmark_gives_the_speed_when_every_peer_timed_it() -> None:
    before = {n: sample(n, 0.0, 0.0, 0.0) for n in ("a", "b")}
    # The loop says the machines are alike; the application runs twice as fast on a.
    after = [sample("a", 10.0, 0.0, 10.0, app=0.1), sample("b", 10.0, 0.0, 10.0, app=0.2)]
    got = {p.name: p.speed for p in periods(before, after)}
    assert got == {"a": pytest.approx(1.0), "b": pytest.approx(0.5)}
    # One peer has not timed it yet: the loop for everyone, not two measures mixed.
    after[1] = sample("b", 10.0, 0.0, 10.0)
    assert {p.name: p.speed for p in periods(before, after)} == {"a": 1.0, "b": 1.0}


def test_wide_overhead_is_within_idle_time() -> None:
    before = {"a": sample("a", 0.0, 0.0, 0.0)}
    got = periods(before, [sample("a", 10.0, 2.0, 8.0, wide=5.0)])
    assert got[0].overhead == pytest.approx(0.2)
    assert got[0].wide_overhead == pytest.approx(0.2)


def test_utilization_counts_idle_stretches() -> None:
    u = Utilization()
    u.set_idle(True, 1.0)
    u.set_idle(True, 2.0)  # still idle: the stretch started at 1.0
    assert u.idle_total(3.0) == pytest.approx(2.0)
    u.set_idle(False, 4.0)
    u.set_idle(False, 5.0)
    assert u.idle_total(9.0) == pytest.approx(3.0)
    u.set_idle(True, 10.0)
    assert u.idle_total(10.5) == pytest.approx(3.5)


def test_the_benchmark_takes_cpu_time_that_grows_with_its_work() -> None:
    small = min(benchmark_cpu_s(20_000) for _ in range(3))
    large = min(benchmark_cpu_s(200_000) for _ in range(3))
    assert 0 < small < large


def test_a_drain_waits_for_confirmation_and_adding_does_not() -> None:
    cfg = AdaptConfig(confirm_periods=2)
    low = decide(peers("c0:1:0.8:0 c0:1:0.8:0"), cfg, master="p0")
    first = confirm(low, None, cfg)
    assert not first.shrinks and first.shrink_streak == 1 and "confirm" in first.why
    second = confirm(low, first, cfg)
    assert second.drain == ("p1",) and second.shrink_streak == 2
    high = decide(peers("c0:1:0:0"), cfg, master="p0")
    assert confirm(high, None, cfg).add == 1
    # a period in between that does not call for a drain starts the count again
    assert not confirm(low, confirm(high, first, cfg), cfg).shrinks
    assert confirm(low, None, AdaptConfig(confirm_periods=1)).drain == ("p1",)


def test_a_peer_that_does_not_answer_counts_as_all_overhead() -> None:
    gone = Sample("far", "c2", 10.0, 0, 0, 0, 1, missing=True, wide=True)
    before = {"a": sample("a", 0.0, 0.0, 0.0), "far": sample("far", 0.0, 0.0, 0.0)}
    got = {p.name: p for p in periods(before, [sample("a", 10.0, 0.0, 10.0), gone])}
    assert got["far"].overhead == 1.0 and got["far"].wide_overhead == 1.0
    assert got["far"].useful == 0.0
    # silent at both ends, too; but an answer after a silence has no baseline yet
    assert periods({"far": gone}, [gone])[0].overhead == 1.0
    assert periods({"far": gone}, [sample("far", 20.0, 0.0, 10.0)]) == []


def test_nothing_is_drained_late_in_a_run_but_peers_may_still_be_added() -> None:
    cfg = AdaptConfig(shrink_until=0.8)
    low = peers("c0:1:0.9:0 c0:1:0.9:0 c1:1:0.9:0.9 c1:1:0.9:0.9")
    assert decide(low, cfg, "p0", done=0.5).shrinks
    late = decide(low, cfg, "p0", done=0.85)
    assert not late.shrinks and "done" in late.why
    assert decide(peers("c0:1:0:0"), cfg, "p0", done=0.95).add == 1
