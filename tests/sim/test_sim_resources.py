"""Per-peer speed, background load and wide-area bandwidth in the simulator (issue 19): a slow
cluster's leaves take longer, a loaded peer's take longer but cost the same CPU time, and a thin
uplink slows the run down without changing its answer."""

from __future__ import annotations

import random
import re
import tomllib

import pytest
import trio

from satind.net import codec
from satind.net import messages as m
from satind.net.memory import LinkFaults, MemoryLink, MemoryNetwork
from satind.net.names import slot_of
from satind.net.transport import Address, Identity
from satind.sim.lockstep import BENCHMARK_WORK_S
from satind.sim.scenario import Scenario, ScenarioError, parse
from satind.sim.simulator import Simulation, simulate

BASE = """
name = "resources"
seed = 3
duration_s = 300

[peers]
clusters = { c0 = 2, c1 = 2 }
{peers}

[network]
latency_ms = 0.5
wide_latency_ms = 10.0

[workload]
depth = 3
branching = 4
leaf_ms = 40.0
dist = "uniform"
submit_at = 3.0

[config]
membership = { probe_interval_s = 0.5 }
"""


def _scenario(peers: str = "", faults: str = "") -> Scenario:
    return parse(tomllib.loads(BASE.replace("{peers}", peers) + faults))


def _run(scenario: Scenario) -> Simulation:
    sim = Simulation(scenario)
    report = sim.run()
    assert report.violations == []
    assert report.result_ok and report.leaves_unique == report.leaves_expected
    return sim


def _work_by_peer(sim: Simulation) -> dict[str, float]:
    """Reference seconds of the leaves each peer ran (the workload's costs), by slot."""
    work = dict.fromkeys(map(slot_of, sim.workers), 0.0)
    for leaf, runners in sim.leaf_runners.items():
        for name in runners:
            work[slot_of(name)] += sim.leaf_cost[leaf]
    return work


def test_a_half_speed_cluster_takes_twice_the_virtual_time_per_leaf() -> None:
    sim = _run(
        _scenario(
            "speeds = { c1 = 0.5 }",
            '[[faults]]\nat = 1.0\njoin = 1\njoin_cluster = "c1"\n',
        )
    )
    work = _work_by_peer(sim)
    assert set(sim.slots) == {"c0/0", "c0/1", "c1/0", "c1/1", "c1/2"}
    for name, driver in ((slot_of(n), d) for n, d in sim.workers.items()):
        slow = name.startswith("c1/")  # the joiner c1/2 included
        factor = 2.0 if slow else 1.0
        assert driver.speed == (0.5 if slow else 1.0)
        assert driver.share == 1.0
        assert driver.busy_s == pytest.approx(factor * work[name])
        assert driver.cpu_seconds() == pytest.approx(factor * work[name])
        assert driver.benchmark_cpu_s() == pytest.approx(factor * BENCHMARK_WORK_S)
        assert driver.benchmark_cpu_s(loops=100_000) == driver.benchmark_cpu_s()
    # Both clusters really computed (otherwise the comparison above says nothing).
    assert min(work[n] for n in ("c0/0", "c1/0", "c1/1")) > 0


def test_background_load_stretches_leaves_but_not_their_cpu_time() -> None:
    sim = _run(
        _scenario(
            "speeds = { c0 = 2.0 }",
            '[[faults]]\nat = 0.5\nload_cluster = "c1"\nshare = 0.25\n'
            '[[faults]]\nat = 0.5\nload = ["c0/1"]\nshare = 0.5\n',
        )
    )
    work = _work_by_peer(sim)
    expect = {"c0/0": (2.0, 1.0), "c0/1": (2.0, 0.5), "c1/0": (1.0, 0.25), "c1/1": (1.0, 0.25)}
    for name, (speed, share) in expect.items():
        driver = sim.workers[sim.slots[name]]
        assert work[name] > 0
        assert (driver.speed, driver.share) == (speed, share)
        assert driver.busy_s == pytest.approx(work[name] / (speed * share))
        # CPU time is the virtual duration times the share: the work over the speed.
        assert driver.cpu_seconds() == pytest.approx(driver.busy_s * share)
        assert driver.cpu_seconds() == pytest.approx(work[name] / speed)
        assert driver.benchmark_cpu_s() == pytest.approx(BENCHMARK_WORK_S / speed)


def test_lifting_the_load_restores_the_share() -> None:
    sim = _run(
        _scenario(
            "",
            '[[faults]]\nat = 0.5\nload_cluster = "c1"\nshare = 0.25\n'
            '[[faults]]\nat = 1.0\nload_cluster = "c1"\nshare = 1.0\n',
        )
    )
    work = _work_by_peer(sim)
    for name, driver in sim.workers.items():
        assert driver.share == 1.0
        assert driver.busy_s == pytest.approx(work[slot_of(name)])  # the run began after the lift


def test_a_thin_uplink_slows_the_run_but_keeps_it_exact_and_deterministic() -> None:
    plain = _scenario()
    thin = _scenario(faults='[[faults]]\nat = 0.0\nbandwidth_cluster = "c1"\nbytes_per_s = 20000\n')
    base = simulate(plain)
    first, again = simulate(thin), simulate(thin)
    for report in (base, first, again):
        assert report.violations == []
        assert report.result_ok and report.leaves_unique == report.leaves_expected
    assert base.makespan_s is not None and first.makespan_s is not None
    assert first.makespan_s > base.makespan_s
    assert first.trace_hash != base.trace_hash
    assert (first.trace_hash, first.makespan_s) == (again.trace_hash, again.makespan_s)


async def test_the_uplink_serializes_wide_messages_each_way(autojump_clock: object) -> None:
    network = MemoryNetwork(random.Random(1), LinkFaults(latency_s=0.001, wide_latency_s=0.01))
    arrivals: list[tuple[str, float]] = []

    def party(name: str, cluster: str, n: int) -> object:
        def handler(link: MemoryLink, msg: m.Message) -> None:
            arrivals.append((name, trio.current_time()))

        return network.attach(Identity(name, cluster, "peer"), Address(f"10.0.0.{n}", 1), handler)

    a, b, c = party("a", "c0", 1), party("b", "c1", 2), party("c", "c1", 3)
    msg = m.DrainRequest(0, ["x" * 200])
    async with trio.open_nursery() as nursery:
        await nursery.start(network.run)
        network.set_uplink("c1", 1000.0)
        for _ in range(2):
            a.post("b", msg)  # type: ignore[attr-defined]  # into c1: the in-queue
        b.post("a", msg)  # type: ignore[attr-defined]  # out of c1: the other queue
        c.post("b", msg)  # type: ignore[attr-defined]  # local: not paced
        await trio.sleep(5.0)
        network.set_uplink("c1", None)
        a.post("b", msg)  # type: ignore[attr-defined]
        await trio.sleep(1.0)
        nursery.cancel_scope.cancel()
    size = len(codec.encode_message(msg)) + 4
    t = size / 1000.0
    expected = [
        ("b", 0.001),
        ("b", t + 0.01),
        ("a", t + 0.01),
        ("b", 2 * t + 0.01),
        ("b", 5.0 + 0.01),
    ]
    assert [n for n, _ in arrivals] == [n for n, _ in expected]
    for (_, got), (_, want) in zip(arrivals, expected, strict=True):
        assert got == pytest.approx(want)


@pytest.mark.parametrize(
    ("peers", "faults", "error"),
    [
        ("speeds = { c9 = 0.5 }", "", "no cluster 'c9'"),
        ("speeds = { c1 = 0.0 }", "", "must be > 0"),
        ("speeds = { c1 = -1 }", "", "must be > 0"),
        ('speeds = { c1 = "fast" }', "", "must be float"),
        ("speeds = 2", "", "speeds must be a table"),
        ("", 'load_cluster = "c9"\nshare = 0.5', "no cluster 'c9'"),
        ("", 'load_cluster = "c1"\nshare = 0.0', "share must be in (0, 1]"),
        ("", 'load_cluster = "c1"\nshare = 1.5', "share must be in (0, 1]"),
        ("", 'load_cluster = "c1"', "share is missing"),
        ("", 'load = "c1/0"\nshare = 0.5', "must be a list of peer names"),
        ("", 'load = ["c1/0"]\nshare = 0.5\nduration = 3.0', "unknown key(s) duration"),
        ("", 'bandwidth_cluster = "c9"\nbytes_per_s = 1000', "no cluster 'c9'"),
        ("", 'bandwidth_cluster = "c1"\nbytes_per_s = 0', "bytes_per_s must be > 0"),
        ("", 'bandwidth_cluster = "c1"\nbytes_per_s = -5.0', "bytes_per_s must be > 0"),
        ("", 'bandwidth_cluster = "c1"', "bytes_per_s is missing"),
        ("", 'bandwidth_cluster = "c1"\nbytes_per_s = 10\nshare = 0.5', "unknown key(s) share"),
    ],
)
def test_resource_keys_are_validated(peers: str, faults: str, error: str) -> None:
    text = f"[[faults]]\nat = 1.0\n{faults}\n" if faults else ""
    with pytest.raises(ScenarioError, match=re.escape(error)):
        _scenario(peers, text)


def test_resource_keys_parse() -> None:
    sc = _scenario(
        "speeds = { c1 = 0.5 }",
        '[[faults]]\nat = 2.0\nload = ["c0/1"]\nshare = 0.3\n'
        '[[faults]]\nat = 1.0\nbandwidth_cluster = "c1"\nbytes_per_s = inf\n',
    )
    assert sc.speeds == {"c1": 0.5}
    bandwidth, load = sc.faults
    assert (bandwidth.kind, bandwidth.cluster, bandwidth.value) == ("bandwidth", "c1", float("inf"))
    assert (load.kind, load.peers, load.value) == ("load", ("c0/1",), 0.3)


def test_a_runs_busy_time_is_the_time_its_peers_spent_in_its_leaves() -> None:
    # The compute side charges its time to the run whose job it runs and none while it blocks
    # for work or for stolen children (``RunState.busy_s``). In virtual time only leaves take
    # time, so the run's busy time is exactly the leaves' durations on every peer, a loaded
    # one's stretched ones included.
    sim = _run(_scenario("", '[[faults]]\nat = 0.5\nload = ["c0/1"]\nshare = 0.5\n'))
    assert sim.result is not None
    leaves = sum(driver.busy_s for driver in sim.workers.values())
    assert leaves > 0 and sim.workers[sim.slots["c0/1"]].busy_s > 0
    assert sim.result.stats["busy_s"] == pytest.approx(leaves)
    # ... and less than the peers had: some waited for work at the start and the end.
    span = sim.end - 3.0  # the run was submitted at 3 s
    assert leaves < len(sim.workers) * span
