"""Shared objects in the simulator (satin-grid-programming-model §3.2, §4.2): an iterative run
whose every job is guarded by a shared clock (the shape of Fig 1's Barnes-Hut), under 10%
message loss, 5% duplicates and a crash, on 20 seeds. Updates are best effort (some are lost);
the guards make every job wait for, or fetch, a current replica: a leaf that ran on a stale one
would raise, and the answer (the tree's, times the steps) is exact."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from satind.sim.report import SimReport
from satind.sim.scenario import load
from satind.sim.simulator import Simulation

SCENARIOS = Path(__file__).parent.parent.parent / "configs" / "scenarios"
SEEDS = range(1, 21)


@functools.cache
def _run(seed: int, name: str = "shared-steps-loss") -> tuple[SimReport, dict[str, int]]:
    sim = Simulation(load(SCENARIOS / f"{name}.toml"), seed)
    report = sim.run()
    counters: dict[str, int] = {}
    for peer in sim.peers.values():
        for name, value in peer.state.sharing.counters.as_dict().items():
            counters[name] = counters.get(name, 0) + int(value)
    return report, counters


@pytest.mark.parametrize("seed", SEEDS)
def test_guarded_steps_under_loss_and_a_crash_give_the_exact_answer(seed: int) -> None:
    report, counters = _run(seed)
    assert report.violations == [] and report.result_ok
    # The clock's updates went out, and thieves fetched their replicas from their victims.
    assert counters["shared_updates_sent"] > 0 and counters["replica_fetches"] > 0


def test_guards_did_make_jobs_wait_on_some_seeds() -> None:
    waits = [_run(seed)[1]["guard_waits"] for seed in SEEDS[:8]]
    assert sum(waits) > 0, waits


@pytest.mark.parametrize("seed", range(1, 9))
def test_guarded_steps_survive_the_loss_of_their_master(seed: int) -> None:
    # The new master runs the root again, under the next epoch: it makes the clock again
    # (same id, a new incarnation, step 0), and replicas of the old incarnation give way.
    report, _ = _run(seed, "shared-steps-master-crash")
    assert report.violations == [] and report.result_ok
