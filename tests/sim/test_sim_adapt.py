"""Self-adaptivity in the simulator (issue 19): the coordinator on the run's master admits
standby peers and drains loaded ones while the run's answer stays exact, across seeds."""

from __future__ import annotations

import tomllib

import pytest

from satind.net.names import slot_of
from satind.sim.scenario import parse
from satind.sim.simulator import Simulation

SCENARIO = """
name = "adaptivity: a loaded cluster, a standby pool"
seed = {seed}
duration_s = 900

[peers]
clusters = {{ c0 = 4, c1 = 4, c2 = 4 }}
standby = {{ c2 = 4 }}
bootstrap = "converged"

[network]
latency_ms = 0.5
wide_latency_ms = 10.0

[workload]
depth = 6
branching = 4
leaf_ms = 100.0
dist = "exp"
submit_at = 5.0
steal = "crs"

[config]
adapt = {{ enabled = {enabled}, period_s = 5.0, e_min = 0.7, e_max = 0.8 }}

[[faults]]
at = 22.0
load_cluster = "c1"
share = 0.05
"""


def run(seed: int, enabled: bool) -> Simulation:
    text = SCENARIO.format(seed=seed, enabled="true" if enabled else "false")
    sim = Simulation(parse(tomllib.loads(text)))
    report = sim.run()
    assert report.result_ok, report.violations
    assert report.invariants_ok, report.violations
    return sim


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_coordinator_admits_standby_peers_and_drains_loaded_ones(seed: int) -> None:
    sim = run(seed, enabled=True)
    made = [d for p in sim.peers.values() for d in p.coordinator.decisions]
    admitted = {slot_of(name) for d in made for name in d.admitted}
    drained = {slot_of(name) for d in made for name in d.decision.drain}
    drained |= {
        f"{d.decision.drain_cluster}/{i}"
        for d in made
        if d.decision.drain_cluster
        for i in range(4)
    }
    assert admitted and admitted <= {f"c2/{i}" for i in range(4)}
    # the loaded peers go (and only they: the others are as fast as each other)
    assert drained and drained <= {f"c1/{i}" for i in range(4)}, made
    assert all(sim.slots[name] in sim.gone for name in drained)
    # the coordinator is the run's master: one peer made every decision
    assert len({p for p, peer in sim.peers.items() if peer.coordinator.decisions}) == 1


def test_without_adaptivity_nobody_is_admitted_or_drained() -> None:
    sim = run(1, enabled=False)
    assert not any(p.coordinator.decisions for p in sim.peers.values())
    assert not sim.gone


def test_provisioning_starts_peers_up_to_max_peers() -> None:
    text = (
        SCENARIO.format(seed=1, enabled="true")
        .replace("clusters = { c0 = 4, c1 = 4, c2 = 4 }", "clusters = { c0 = 4 }")
        .replace("standby = { c2 = 4 }\n", "")
        .replace("e_max = 0.8 }", 'e_max = 0.8, provision_command = ["sim"], max_peers = 7 }')
        .split("[[faults]]")[0]
    )
    sim = Simulation(parse(tomllib.loads(text)))
    report = sim.run()
    assert report.result_ok and report.invariants_ok, report.violations
    made = [d for p in sim.peers.values() for d in p.coordinator.decisions]
    assert sum(d.provisioned for d in made) == 3
    assert sorted(sim.slots) == [f"c0/{i}" for i in range(7)]
