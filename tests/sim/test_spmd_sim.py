"""SPMD and iterative runs mastered by different peers at once, in the simulator (issue 28,
point 7). Every SPMD run spreads its entities over every peer, and an iterative master pushes
its tasks to the others: each peer holds work of runs that other peers master while its own
compute thread runs the root of a run it masters. Before the fix, two heat2d runs submitted at
once to two masters never ended (engine/worker.py ``sync_frame``; docs/spmd.md "Runs beside
runs"); and a divide-and-conquer tree beside them ran on one peer, its work hidden from
thieves behind a root waiting in its master's queue (work/workqueue.py ``steal``). Each run
here must end with its plugin's check "ok", nothing left behind."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from satind.net.names import slot_of
from satind.sim.scenario import Scenario, load, parse
from satind.sim.simulator import SimReport, Simulation, simulate

SCENARIOS = Path(__file__).parent.parent.parent / "configs" / "scenarios"
SEEDS = range(1, 1 + int(os.environ.get("SATIND_SIM_SEEDS", "6")))


def _scenario(masters: list[str], peers: int = 3) -> Scenario:
    """heat2d runs of different sizes, one per master named, all submitted at once."""
    sizes = [["24", "16", "20", "4"], ["20", "12", "25", "3"], ["18", "10", "15", "5"]]
    data: dict[str, Any] = {
        "name": f"{len(masters)} spmd runs",
        "duration_s": 60.0,
        "peers": {"clusters": {"c0": peers}, "bootstrap": "converged"},
        "network": {"latency_ms": 2.0},
        "runs": [
            {"plugin": "heat2d", "argv": sizes[i % len(sizes)], "to": to, "at": 2.0}
            for i, to in enumerate(masters)
        ],
    }
    return parse(data)


def _ended_exact(report: SimReport, runs: int) -> None:
    assert report.invariants_ok, report.violations
    assert len(report.runs) == runs
    assert all(r["check"] == "ok" and not r["error"] for r in report.runs), report.runs


@pytest.mark.parametrize("seed", SEEDS)
def test_two_spmd_runs_mastered_by_two_peers_at_once_end_exact(seed: int) -> None:
    _ended_exact(simulate(_scenario(["c0/0", "c0/1"], peers=2), seed), 2)


@pytest.mark.parametrize("seed", SEEDS)
def test_three_spmd_runs_mastered_by_three_peers_at_once_end_exact(seed: int) -> None:
    _ended_exact(simulate(_scenario(["c0/0", "c0/1", "c0/2"]), seed), 3)


@pytest.mark.parametrize("seed", SEEDS)
def test_spmd_iterative_and_divide_and_conquer_runs_mastered_anywhere_share_the_peers(
    seed: int,
) -> None:
    # The shipped scenario: three heat2d and two kmeans runs and a tree at once over three
    # masters (a master's second root waits in its queue for the root before it).
    sim = Simulation(load(SCENARIOS / "spmd-masters.toml"), seed)
    report = sim.run()
    _ended_exact(report, 5)  # and the tree's answer is exact, every leaf ran once
    assert sorted(r["plugin"] for r in report.runs) == ["heat2d"] * 3 + ["kmeans"] * 2
    # The tree was shared: a root waiting at the oldest end of a queue hid the work behind
    # it from every thief, and one peer ran the whole tree.
    assert {slot_of(r[-1]) for r in sim.leaf_runners.values()} == {"c0/0", "c0/1", "c0/2"}


def test_the_same_seed_gives_the_same_history() -> None:
    scenario = _scenario(["c0/0", "c0/1", "c0/2"])
    first, again = simulate(scenario, 3), simulate(scenario, 3)
    assert first.trace_hash == again.trace_hash and first.runs == again.runs
    assert simulate(scenario, 4).trace_hash != first.trace_hash
