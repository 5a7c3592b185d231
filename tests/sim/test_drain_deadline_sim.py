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
