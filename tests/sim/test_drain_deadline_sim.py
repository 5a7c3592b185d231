"""A leave that leaves (issue 31; satin-fault-tolerance-malleability-migration §3.3): drained
with a deadline of 0, a thief and a master leave at once — within the cut grace, not when their
work is done — their unfinished work is restarted by its owners and what they had finished is
reused. Always the exact answer."""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

import pytest

from satind.sim.scenario import parse
from satind.sim.simulator import SimReport, simulate

SCENARIOS = Path(__file__).parent.parent.parent / "configs" / "scenarios"
SEEDS = range(1, 6)


@functools.cache
def _run(name: str, seed: int, deadline: float | None) -> SimReport:
    data = tomllib.loads((SCENARIOS / f"{name}.toml").read_text())
    for fault in data["faults"]:
        if "drain" in fault and deadline is not None:
            fault["deadline"] = deadline
    return simulate(parse(data), seed)


def _drained_at(name: str) -> float:
    data = tomllib.loads((SCENARIOS / f"{name}.toml").read_text())
    return float(next(f["at"] for f in data["faults"] if "drain" in f))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", ["drain-mid-run", "master-drain"])
def test_a_drain_with_deadline_0_leaves_at_once_and_the_answer_is_exact(
    name: str, seed: int
) -> None:
    report = _run(name, seed, 0.0)
    assert report.violations == []
    assert report.result_ok and report.leaves_unique == report.leaves_expected
    at = _drained_at(name)
    assert report.left_at, "the drained peers left"
    # Gone within 2 s: the cut grace (1 s) and the leave's linger, not the rest of their work.
    assert all(t - at < 2.0 for t in report.left_at.values()), report.left_at


@pytest.mark.parametrize("name", ["drain-mid-run", "master-drain"])
def test_what_the_leaving_peers_finished_is_reused(name: str) -> None:
    reports = [_run(name, seed, 0.0) for seed in SEEDS]
    assert sum(r.results_reused for r in reports) > 0
    if name == "drain-mid-run":
        # The thieves' unfinished work was cut: their victims restarted it.
        assert sum(r.jobs_restarted for r in reports) > 0


def test_without_a_deadline_a_drain_finishes_its_work_first() -> None:
    at = _drained_at("drain-mid-run")
    slow = [max(_run("drain-mid-run", seed, None).left_at.values()) - at for seed in SEEDS]
    fast = [max(_run("drain-mid-run", seed, 0.0).left_at.values()) - at for seed in SEEDS]
    assert sum(slow) > sum(fast)
    assert all(_run("drain-mid-run", seed, None).jobs_restarted == 0 for seed in SEEDS)


def _master_cluster_leaves(seed: int) -> SimReport:
    """The master's whole cluster drained at once with deadline 0, mid-run (the papers' Fig 6
    "leaving gracefully" with the master's cluster; benchmarks/testbed_experiments.py)."""
    data = {
        "name": "the master's cluster leaves",
        "duration_s": 120.0,
        "peers": {"clusters": {"c0": 4, "c1": 4}},
        "network": {"latency_ms": 0.5, "wide_latency_ms": 10.0},
        "workload": {"depth": 3, "branching": 6, "leaf_ms": 200.0, "submit_at": 5.0},
        "config": {"membership": {"probe_interval_s": 0.5, "suspicion_mult": 3}},
        "faults": [{"at": 7.0, "drain": [f"c0/{i}" for i in range(4)], "deadline": 0.0}],
    }
    return simulate(parse(data), seed)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_masters_whole_cluster_leaving_hands_the_run_to_the_other(seed: int) -> None:
    # Each drained peer knows the others leave with it, so the run goes to c1 (not from one
    # leaving peer of c0 to the next until it is lost), and the client follows a survivor
    # that stays. Both used to fail: the run never ended, for every seed.
    report = _master_cluster_leaves(seed)
    assert report.violations == []
    assert report.result_ok and report.leaves_unique == report.leaves_expected
