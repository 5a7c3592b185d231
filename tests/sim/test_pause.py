"""A master paused long enough to be taken for dead (SIGSTOP, a long GC, a suspended laptop):
a survivor takes the run over and finishes it; when the old master resumes it must drop its
own epoch and hand the result to its submitter, who waited on it all along. On these seeds
the old master resumes knowing only that the run ended (it never heard the new epoch run),
which before the fix left it computing its stale epoch and bouncing jobs between itself and
peers that knew the run was over ("taking back ...: does not have it"), forever."""

from __future__ import annotations

from pathlib import Path

import pytest

from satind.sim.scenario import load
from satind.sim.simulator import simulate

SCENARIO = Path(__file__).parent.parent.parent / "configs" / "scenarios" / "master-pause.toml"


@pytest.mark.parametrize("seed", range(1, 11))
def test_a_paused_master_hands_its_submitter_the_new_masters_result(seed: int) -> None:
    scenario = load(SCENARIO)
    report = simulate(scenario, seed)
    assert report.violations == []
    assert report.result_ok and report.leaves_unique == report.leaves_expected
    # The submitter talks to the paused master only: its answer comes once the master
    # resumes (the pause is [8 s, 68 s) after a submit at 5 s), not from a later epoch of
    # its own.
    pause = next(f for f in scenario.faults if f.kind == "pause")
    assert report.makespan_s is not None
    assert report.makespan_s < pause.at + pause.duration - scenario.submit_at + 5.0
