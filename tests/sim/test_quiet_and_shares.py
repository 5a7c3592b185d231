"""Two defects of the first house, in the simulator: a system whose run ended must go quiet
(before, its peers kept sending steal requests, about 90 a second each, until another run
started), and a run's statistics must keep the share of peers that drained and left mid-run
(before, `tree 7 4 20 sleep` counted 12,288 spawns instead of 21,844 when a cluster was
drained: the master only asked the peers still there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from satind.sim.scenario import load
from satind.sim.simulator import simulate

SCENARIOS = Path(__file__).parent.parent.parent / "configs" / "scenarios"


def test_an_idle_system_sends_no_steal_requests() -> None:
    report = simulate(load(SCENARIOS / "small.toml"))
    assert report.violations == []
    assert report.idle_s >= 3.0  # 8 peers idle for that long after the run ended
    assert report.steal_attempts_idle == 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_runs_statistics_count_the_peers_that_drained(seed: int) -> None:
    report = simulate(load(SCENARIOS / "drain-mid-run.toml"), seed)
    assert report.violations == []
    assert report.result_spawns == report.spawns_expected
