"""Run a scenario: many real peers in one trio run, on virtual time, with faults.

Every peer is a real ``satind.node.peer.Peer`` — the same membership, gossip, stealing, run
and compute code as a deployed peer — on the in-memory network (``net/memory.py``), its
compute side driven in lockstep with virtual time (``sim/lockstep.py``: the synthetic tree's
leaves cost virtual seconds). A simulated client submits the workload
with the real protocol; the fault schedule crashes, drains, adds and partitions peers and
changes the drop rate; at the end the invariants are checked.

Each mechanism has its module: ``sim/state.py`` (what a simulation holds, the trace hash, the
leaf accounting), ``sim/peers.py`` (building peers), ``sim/faults.py`` (the fault schedule),
``sim/client.py`` (the simulated client), ``sim/convergence.py`` (membership agreement,
steal attempts), ``sim/determinism.py`` (virtual time, the seeded scheduler); this one puts
them together and runs the scenario.
"""

from __future__ import annotations

import random
import time

import trio

from satind.membership.view import State
from satind.net.memory import LinkFaults, MemoryNetwork
from satind.net.tls import GRANTS
from satind.net.transport import Address, Identity
from satind.sim.client import CLIENT, SimClient
from satind.sim.convergence import ConvergenceWatch
from satind.sim.determinism import JumpingClock, deterministic_trio, fewer_collections
from satind.sim.faults import FaultInjector
from satind.sim.report import SimReport, report
from satind.sim.scenario import Scenario


class Simulation(FaultInjector, SimClient, ConvergenceWatch):
    """One scenario, one seed.

    Args:
        plugin: run this plugin with ``argv`` instead of the scenario's synthetic workload
            (the scenario has none), submitted at its ``submit_at``: how a test runs a real
            plugin through the scenario's faults. Its jobs cost virtual time only where they
            call ``lockstep.spend``; the report's ``result_ok`` is its check's verdict, made
            on the run's master as on a real run.
    """

    # -- the run -----------------------------------------------------------------------------

    async def main(self) -> None:
        sc = self.scenario
        faults = LinkFaults(
            latency_s=sc.latency_s,
            wide_latency_s=sc.wide_latency_s,
            jitter_s=sc.jitter_s,
            drop=sc.drop,
            duplicate=sc.duplicate,
        )
        network = MemoryNetwork(random.Random(self.rng.getrandbits(64)), faults)
        network.on_deliver = self._on_deliver
        async with trio.open_nursery() as nursery:
            await nursery.start(network.run)
            first: Address | None = None
            converged = sc.bootstrap == "converged"
            for cluster in sorted(sc.clusters):
                working = sc.clusters[cluster] - sc.standby.get(cluster, 0)
                for i in range(sc.clusters[cluster]):
                    seeds = [] if first is None or converged else [first]
                    peer = await self.start_peer(
                        nursery, network, cluster, seeds, standby=i >= working
                    )
                    first = first or peer.options.listen
            if converged:
                everyone = [p.table.me for p in self.peers.values()]
                for peer in self.peers.values():
                    peer.table.add_known(everyone)
            client = network.attach(
                Identity(CLIENT, "", "client", frozenset(GRANTS)),
                Address("10.255.255.1", 1),
                self._client_message,
            )
            self.client = client
            self._faults_left = len(sc.faults)
            if not sc.faults:
                self._faults_done.set()
            for fault in sc.faults:
                nursery.start_soon(self._fault, fault, nursery, network, client)
            nursery.start_soon(self._watch_convergence)
            if sc.workload is not None or self.plugin is not None:
                nursery.start_soon(self._submit, client)
            for index in range(len(self.runs)):
                nursery.start_soon(self._submit_run, client, index)
            with trio.move_on_at(sc.duration_s):
                await self._done.wait()
                await self._faults_done.wait()
                # The end of the run spreads; from then on nobody should look for work.
                await trio.sleep(1.0)
                self.idle_from = trio.current_time()
                self.attempts_at_idle = self.steal_attempts()
                settle = self._settle_s()
                # A fault or a result may move last_change while we sleep: check again.
                while trio.current_time() < self.last_change + settle:  # noqa: ASYNC110
                    await trio.sleep_until(self.last_change + settle)
                # Under message loss a member may be wrongly declared dead at any moment (its
                # refutation lost on the way to some peer): what must hold is that the views
                # come to agree, not that they agree at the moment the settle ends (seed 20 of
                # needle-crash-loss ended 0.4 s after such a death, after a change of schedule).
                with trio.move_on_after(2 * self.cfg.membership.push_pull_interval_s):
                    while not self._agreed():  # noqa: ASYNC110
                        await trio.sleep(0.25)
            self.end = trio.current_time()
            self.network = network
            nursery.cancel_scope.cancel()

    # -- the verdict -------------------------------------------------------------------------

    def run(self) -> SimReport:
        wall = time.perf_counter()
        with deterministic_trio(self.seed), fewer_collections():
            trio.run(self.main, clock=JumpingClock())
        return report(self, time.perf_counter() - wall)


def simulate(scenario: Scenario, seed: int | None = None) -> SimReport:
    """Run one scenario; the report says what happened and whether every invariant held."""
    return Simulation(scenario, seed).run()


__all__ = ["SimReport", "Simulation", "State", "simulate"]
