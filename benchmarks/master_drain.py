"""What draining a run's master costs, in the simulator (issue 13, point 2): the master of a
tree on 2 clusters of 4 peers is drained at 8 s (3 s into the run), against the same run with
no fault and with the master crashing at the same moment.

    python benchmarks/master_drain.py [--seeds 8]

Per variant, the median over the seeds of the makespan, the leaf work computed twice, and (for
the drain) how long after the drain request the master was gone. Before the hand-over, a
draining master stayed until its run ended: it was gone only at the end of the makespan.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
from pathlib import Path

from satind.sim.scenario import load
from satind.sim.simulator import Simulation

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "configs" / "scenarios" / "master-drain.toml"
DRAIN_AT = 8.0


def one(variant: str, seed: int) -> tuple[float, float, float | None]:
    scenario = load(SCENARIO)
    if variant == "none":
        scenario = dataclasses.replace(scenario, faults=[])
    elif variant == "crash":
        fault = dataclasses.replace(scenario.faults[0], kind="crash")
        scenario = dataclasses.replace(scenario, faults=[fault])
    sim = Simulation(scenario, seed)
    report = sim.run()
    assert report.violations == [] and report.result_ok, report.violations
    assert report.makespan_s is not None
    gone = sim.left_at.get(sim.slots["c0/0"])
    return report.makespan_s, report.redone_s, None if gone is None else gone - DRAIN_AT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args()
    seeds = range(1, args.seeds + 1)
    print(f"{'variant':<8} {'makespan s':>11} {'redone s':>9} {'master gone after s':>20}")
    for variant in ("none", "drain", "crash"):
        rows = [one(variant, seed) for seed in seeds]
        makespan = statistics.median(r[0] for r in rows)
        redone = statistics.median(r[1] for r in rows)
        gone = [r[2] for r in rows if r[2] is not None]
        left = f"{statistics.median(gone):.2f}" if gone else "-"
        print(f"{variant:<8} {makespan:>11.2f} {redone:>9.2f} {left:>20}")


if __name__ == "__main__":
    main()
