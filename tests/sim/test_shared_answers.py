"""Answers and shared objects in the simulator (issue 28, point 0).

* A job's result never overtakes the global calls its subtree made: when it is applied at its
  parent, those calls have been applied to the parent's replicas (a plugin whose root reads a
  shared tally after its sync gets the exact sum, on every seed, with no fault).
* A new master's epoch makes a shared object again, fresh: an improvement made under the old
  incarnation is gone. The built-in branch-and-bound plugins return their answer as values
  (the shared bound only prunes), so tsp and knapsack give the exact optimum through the loss
  of their master, checked against an independent reference (tests/independent.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest.mock import patch

import pytest
from satind_plugins import _count, knapsack, tsp

from satind import Plugin, SharedObject, global_method, spawnable, sync
from satind.net import codec
from satind.net.names import slot_of
from satind.sim.lockstep import spend
from satind.sim.scenario import Fault, Scenario
from satind.sim.simulator import Simulation
from tests import independent

# -- a result and its subtree's global calls --------------------------------------------------


class Tally(SharedObject):
    """A sum every job adds to with a global call."""

    def __init__(self) -> None:
        self.total = 0

    @global_method
    def add(self, n: int) -> None:
        self.total += n


@spawnable
def tally_leaf(tally: Tally, i: int) -> None:
    spend(0.05, None)  # virtual time: thieves steal the other leaves meanwhile
    tally.add(i)


@spawnable
def tally_node(tally: Tally, lo: int, hi: int) -> None:
    if hi - lo <= 2:
        for i in range(lo, hi):
            tally_leaf.spawn(tally, i)
    else:
        mid = (lo + hi) // 2
        tally_node.spawn(tally, lo, mid)
        tally_node.spawn(tally, mid, hi)
    sync()


@spawnable
def tally_root(n: int) -> int:
    tally = Tally()
    tally_node(tally, 0, n)  # a plain call: its spawns are this job's
    return tally.total  # read after the sync: every call of the subtree is applied here


def _tally_check(args: tuple[Any, ...], result: int) -> None:
    if result != sum(range(args[0])):
        raise AssertionError(f"the tally is {result}, not {sum(range(args[0]))}")


TALLY = Plugin(
    name="tally",
    entry=tally_root,
    usage="tally N",
    parse=lambda argv: (int(argv[0]),),
    max_branching=2,
    check=_tally_check,
)


def _scenario(name: str, faults: tuple[Fault, ...] = (), duration_s: float = 300.0) -> Scenario:
    return Scenario(
        name=name,
        seed=1,
        duration_s=duration_s,
        clusters={"c0": 2, "c1": 2},
        latency_s=0.0005,
        wide_latency_s=0.005,
        jitter_s=0.002,
        faults=faults,
    )


TALLY_SEEDS = range(1, 7)


@functools.cache
def _tally(seed: int) -> tuple[list[str], Any, int, int]:
    sim = Simulation(_scenario("tally"), seed, plugin=TALLY, argv=["64"])
    report = sim.run()
    assert sim.result is not None and sim.result.value is not None, report.violations
    waited = sum(p.state.sharing.counters.results_waited for p in sim.peers.values())
    stolen = report.stolen_local + report.stolen_wide
    return report.violations, codec.decode_value(sim.result.value), stolen, waited


@pytest.mark.parametrize("seed", TALLY_SEEDS)
def test_a_result_never_overtakes_the_global_calls_of_its_subtree(seed: int) -> None:
    # Before: a thief's result went at once and its calls after shared.combine_s, so the
    # root read a tally short of the calls still on their way (1979 for 2016 on seed 1); and
    # a replica fetched twice undid a thief's own calls, whose numbers it then gave out again
    # (seed 2).
    violations, total, stolen, _ = _tally(seed)
    assert violations == []
    assert stolen > 0  # other peers ran leaves
    assert total == sum(range(64))


def test_results_did_wait_for_calls_on_some_seeds() -> None:
    # The calls go before the result on the same link, but the simulated network's jitter
    # reorders messages, and a subtree's calls made on a third peer come on their own link.
    assert sum(_tally(seed)[3] for seed in TALLY_SEEDS) > 0


# -- branch and bound through the loss of the master ------------------------------------------

# Per plugin: its arguments, the virtual seconds each search node costs (so that thieves steal
# and the master's crash falls mid-run), when the master crashes, and what is patched. tsp 10 4
# is the instance of the issue. knapsack's first bound comes from a dive of DIVE_NODES nodes
# that finds the optimum of these small instances by itself; a short dive leaves improving it
# to the shared bound, whose improvements a new master's incarnation drops.
CASES: dict[str, tuple[list[str], float, float, dict[str, int]]] = {
    "tsp": (["10", "4"], 1e-3, 7.0, {}),
    "knapsack": (["40", "1"], 5e-5, 8.0, {"DIVE_NODES": 300}),
}


@contextmanager
def costed(module: Any, node_s: float) -> Iterator[None]:
    """The plugin's sequential searches spend virtual time in proportion to the nodes they
    visit (a real peer spends real time; the simulator's only costs are what ``spend``
    says)."""
    searched: Callable[..., Any] = module.searched

    def with_cost(search: Callable[..., Any], *args: Any) -> Any:
        before = _count.VISITED[0]
        result = searched(search, *args)
        spend((_count.VISITED[0] - before) * node_s, None)
        return result

    with patch.object(module, "searched", with_cost):
        yield


@functools.cache
def _branch_and_bound(plugin_name: str, seed: int) -> tuple[list[str], Any, float, int]:
    module = {"tsp": tsp, "knapsack": knapsack}[plugin_name]
    argv, node_s, crash_at, patched = CASES[plugin_name]
    crash = Fault(at=crash_at, kind="crash", peers=("c0/0",))  # the master: the first name
    with costed(module, node_s), patch.dict(vars(module), patched):
        sim = Simulation(
            _scenario(f"{plugin_name}-master-crash", (crash,)),
            seed,
            plugin=module.PLUGIN,
            argv=argv,
        )
        report = sim.run()
    assert slot_of(sim.master) == "c0/0" and sim.result is not None and sim.result_at is not None
    assert sim.result.value is not None, report.violations
    reused = report.results_reused
    return report.violations, codec.decode_value(sim.result.value), sim.result_at, reused


def _reference(plugin_name: str) -> int:
    argv = CASES[plugin_name][0]
    if plugin_name == "tsp":
        return independent.tsp_exact(tsp.cities(int(argv[0]), int(argv[1])))
    (weights, values), capacity = knapsack.instance(int(argv[0]), int(argv[1]))
    return independent.knapsack(list(weights), list(values), capacity)


@pytest.mark.parametrize("seed", range(1, 5))
@pytest.mark.parametrize("plugin_name", sorted(CASES))
def test_branch_and_bound_gives_the_optimum_through_the_loss_of_its_master(
    plugin_name: str, seed: int
) -> None:
    # The new master reuses what the old epoch's thieves finished (orphans); under main's
    # plugins, which read the answer from the shared bound, the improvement those thieves
    # made went with the old incarnation and the answer came out too long (tsp 10 4: 3203
    # for 3202) or too small (knapsack).
    violations, result, ended, reused = _branch_and_bound(plugin_name, seed)
    assert ended > CASES[plugin_name][2]  # the master was lost mid-run: a new one finished it
    assert reused > 0
    assert violations == []
    assert result == _reference(plugin_name)
