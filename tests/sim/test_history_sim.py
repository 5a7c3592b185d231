"""What the run history records of a run's masters (node/tracing.py ``masters_seen``, read by
node/recorder.py), in the simulator: a run whose master drained and handed it over had two,
and the peers that saw both say so, the first first. (The history's file itself is tested
with real processes, tests/integration/test_history_procs.py: its writes run in threads,
which the simulator's virtual clock does not wait for.)"""

from __future__ import annotations

from pathlib import Path

from satind.sim.scenario import load
from satind.sim.simulator import Simulation

SCENARIOS = Path(__file__).parent.parent.parent / "configs" / "scenarios"


def test_a_handed_over_run_had_two_masters_as_its_peers_saw_them() -> None:
    sim = Simulation(load(SCENARIOS / "master-drain.toml"), 1)
    report = sim.run()
    assert report.violations == [] and report.result_ok
    seen = {
        name: peer.masters_of(run_id)
        for name, peer in sim.peers.items()
        for run_id in peer.state.runs.ended
    }
    assert seen
    both = [masters for masters in seen.values() if len(masters) == 2]
    assert both, seen
    for masters in both:
        assert masters[0] == "c0/0@0" and masters[1].endswith("@1") and masters[1] != "c0/0@1"
