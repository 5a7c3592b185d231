"""The deterministic simulator: real peer code, virtual time, faults; every invariant checked
in every run (SimReport.violations)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from satind.sim.scenario import Scenario, ScenarioError, load, parse
from satind.sim.simulator import SimReport, simulate
from satind.sim.workload import Workload, expected

SCENARIOS = Path(__file__).parent.parent.parent / "configs" / "scenarios"


def _ok(report: SimReport) -> None:
    assert report.invariants_ok, report.violations
    assert report.violations == []


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    scenario = load(SCENARIOS / "small.toml")
    first, again, other = simulate(scenario, 1), simulate(scenario, 1), simulate(scenario, 2)
    for report in (first, again, other):
        _ok(report)
    assert first.trace_hash == again.trace_hash and first.trace_events == again.trace_events
    assert first.makespan_s == again.makespan_s
    assert other.trace_hash != first.trace_hash


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("name", ["small", "partition", "crash-before-run"])
def test_shipped_scenarios_hold_every_invariant(name: str, seed: int) -> None:
    report = simulate(load(SCENARIOS / f"{name}.toml"), seed)
    _ok(report)
    assert report.result_ok and report.leaves_unique == report.leaves_expected


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_ten_percent_loss_and_duplicates_still_give_the_right_answer(seed: int) -> None:
    report = simulate(load(SCENARIOS / "lossy.toml"), seed)
    _ok(report)
    assert report.messages_dropped > 0  # the faults really happened


def test_membership_of_a_hundred_peers_converges_through_crashes_and_drains() -> None:
    report = simulate(load(SCENARIOS / "membership-100.toml"))
    _ok(report)
    assert report.peers == 100
    assert report.convergence_s is not None and report.convergence_s < 30


def test_five_hundred_peers_run_to_completion() -> None:
    report = simulate(load(SCENARIOS / "run-500-quick.toml"))
    _ok(report)
    assert report.peers == 500 and report.result_ok
    assert report.stolen_local + report.stolen_wide > 100  # the work really spread


def test_crs_makes_far_fewer_wide_area_steals_than_rs() -> None:
    base = load(SCENARIOS / "small.toml")
    scenario = dataclasses.replace(
        base,
        clusters={"c0": 6, "c1": 6},
        wide_latency_s=0.05,
        workload=Workload(depth=5, branching=4, leaf_ms=30.0, dist="exp", imbalance=0.3),
    )
    crs = simulate(dataclasses.replace(scenario, steal="crs"), 7)
    rs = simulate(dataclasses.replace(scenario, steal="rs"), 7)
    _ok(crs)
    _ok(rs)

    # RS sends about half its requests to the other cluster and waits for each; CRS keeps at
    # most one asynchronous wide-area request per peer out, overlapped with local steals
    # (satin §4.1.2, Table VI: local traffic dominates with CRS, wide-area with RS).
    def wide_share(r: SimReport) -> float:
        return r.steal_attempts_wide / (r.steal_attempts_wide + r.steal_attempts_local)

    assert crs.steal_attempts_wide < rs.steal_attempts_wide
    assert wide_share(crs) < wide_share(rs) / 2
    assert crs.stolen_local > crs.stolen_wide
    assert crs.makespan_s is not None and rs.makespan_s is not None
    assert crs.makespan_s < rs.makespan_s  # RS idles through wide-area round trips


def test_a_wrong_answer_is_reported() -> None:
    # The invariant checker itself: feed it a workload whose answer cannot match.
    scenario = load(SCENARIOS / "small.toml")
    assert scenario.workload is not None
    broken = dataclasses.replace(scenario, workload=dataclasses.replace(scenario.workload, depth=4))
    report = simulate(broken, 1)
    assert report.invariants_ok  # the scenario itself is consistent...
    assert broken.workload is not None
    answer, leaves, _ = expected(broken.workload)
    assert report.leaves_expected == leaves
    other_answer, _, _ = expected(scenario.workload)
    assert answer != other_answer  # ...and the answers of different trees differ


def test_scenario_errors_name_the_key() -> None:
    with pytest.raises(ScenarioError, match="peers"):
        parse({"name": "x"})
    with pytest.raises(ScenarioError, match="unknown key"):
        parse({"peers": {"clusters": {"c0": 2}}, "bogus": 1})
    with pytest.raises(ScenarioError, match=r"workload\.dist"):
        parse({"peers": {"clusters": {"c0": 2}}, "workload": {"dist": "zipf"}})
    with pytest.raises(ScenarioError, match="exactly one of"):
        parse({"peers": {"clusters": {"c0": 2}}, "faults": [{"at": 1.0}]})
    with pytest.raises(ScenarioError, match="no cluster"):
        parse({"peers": {"clusters": {"c0": 2}}, "faults": [{"at": 1.0, "crash_cluster": "c9"}]})
    with pytest.raises(ScenarioError, match=r"\[config\]"):
        parse({"peers": {"clusters": {"c0": 2}}, "config": {"steal": {"nope": 1}}})
    run = {"plugin": "heat2d", "argv": ["8", "8", "2"], "to": "c0/0", "at": 1.0}
    with pytest.raises(ScenarioError, match=r"runs\[0\]\.plugin: no plugin 'nope' is installed"):
        parse({"peers": {"clusters": {"c0": 2}}, "runs": [{**run, "plugin": "nope"}]})
    with pytest.raises(ScenarioError, match=r"runs\[1\]\.argv must be a list of strings"):
        parse({"peers": {"clusters": {"c0": 2}}, "runs": [run, {**run, "argv": "8 8 2"}]})
    with pytest.raises(ScenarioError, match=r"runs\[0\]\.to must name a peer"):
        parse({"peers": {"clusters": {"c0": 2}}, "runs": [{**run, "to": "c0"}]})


def test_every_shipped_scenario_parses() -> None:
    names = sorted(p.name for p in SCENARIOS.glob("*.toml"))
    assert len(names) >= 6
    for path in SCENARIOS.glob("*.toml"):
        assert isinstance(load(path), Scenario)
