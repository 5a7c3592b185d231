"""The scenario's fault schedule, applied at its virtual times: crashes, restarts, drains,
joins, damaged checkpoint logs, resumes, drop rate, background load, bandwidth, pauses and
partitions (the kinds are documented in ``sim/scenario.py``)."""

from __future__ import annotations

import math
from typing import Any

import trio

from satind.net import messages as m
from satind.net.memory import MemoryNetwork
from satind.sim.peers import PeerStarter
from satind.sim.scenario import Fault
from satind.work.jobs import path_indices


class FaultInjector(PeerStarter):
    """Applies the scenario's faults (it starts peers: joins and restarts)."""

    async def _fault(
        self, fault: Fault, nursery: trio.Nursery, network: MemoryNetwork, client: Any
    ) -> None:
        try:
            await self._apply(fault, nursery, network, client)
        finally:
            self._faults_left -= 1
            if self._faults_left == 0:
                self._faults_done.set()

    async def _apply(
        self, fault: Fault, nursery: trio.Nursery, network: MemoryNetwork, client: Any
    ) -> None:
        await trio.sleep_until(fault.at)
        self.last_change = trio.current_time()
        self.trace("fault", repr(fault).encode())
        if fault.kind in ("crash", "crash_all"):
            names = self.named(fault.peers) + [
                n
                for n in self.live()
                if n.rsplit("/", 1)[0] in fault.clusters or fault.kind == "crash_all"
            ]
            for name in names:
                if name in self.peers and name not in self.gone:
                    network.detach(name)
                    self.scopes[name].cancel()
                    self.gone.add(name)
            if self.waits_on(names):
                self._follow(client)
        elif fault.kind == "restart":
            names = [n for n in self.named(fault.peers) if n in self.peers and n not in self.gone]
            for name in names:
                network.detach(name)
                self.scopes[name].cancel()
                self.gone.add(name)
            if self.waits_on(names):
                self._follow(client)
            await trio.sleep(fault.duration)
            self.last_change = trio.current_time()
            for name in names:
                old = self.peers[name]
                alive = self.live()
                seeds = [
                    self.peers[n].options.listen for n in self.rng.sample(alive, min(3, len(alive)))
                ]
                await self.start_peer(
                    nursery, network, old.options.cluster, seeds, slot=old.options.name
                )
                self.trace("restart", name.encode())
        elif fault.kind == "drain":
            names = self.named(fault.peers)
            self.drained.update(names)
            if names:
                # One request naming them all, as `satind drain A B` and `--cluster` send it:
                # each drained peer knows who leaves with it (core/drain.py's ``leaving``).
                # A request per peer named only that peer, and a draining master could hand
                # its run to another that was leaving too, and so on until the run was lost.
                client.post(names[0], m.DrainRequest(0, names, deadline_s=fault.value))
        elif fault.kind == "join":
            alive = self.live()
            for _ in range(fault.count):
                seeds = [
                    self.peers[n].options.listen for n in self.rng.sample(alive, min(3, len(alive)))
                ]
                peer = await self.start_peer(nursery, network, fault.cluster, seeds)
                alive = alive or [peer.name]  # after a total loss the first joiner is the seed
        elif fault.kind == "damage_logs":
            self._damage_logs(fault.count)
        elif fault.kind == "resume":
            await self._resume(client)
        elif fault.kind == "drop":
            network.faults.drop = fault.value
        elif fault.kind == "load":
            # The peers there now; a peer that joins later starts unloaded.
            names = self.named(fault.peers) + [
                n for n in self.live() if n.rsplit("/", 1)[0] in fault.clusters
            ]
            for name in names:
                if name in self.workers and name not in self.gone:
                    self.workers[name].share = fault.value
        elif fault.kind == "bandwidth":
            network.set_uplink(fault.cluster, None if fault.value == math.inf else fault.value)
        elif fault.kind == "pause":
            paused = [n for n in self.named(fault.peers) if n in self.peers and n not in self.gone]
            for name in paused:
                network.hold(name)
                self.workers[name].freeze()
            await trio.sleep(fault.duration)
            for name in paused:
                self.workers[name].thaw()
                network.release(name)
            self.last_change = trio.current_time()
            self.trace("resume-peers", ",".join(fault.peers).encode())
        elif fault.kind == "partition":
            sides = [self._expand(side) for side in fault.sides]
            network.partition(sides[0], sides[1])
            await trio.sleep(fault.duration)
            network.heal()
            self.last_change = trio.current_time()
            self.trace("heal", b"")

    def _damage_logs(self, flips: int) -> None:
        """Cut every log at a random offset in its second half, then flip random bits: what a
        crash during a write and a bad disk do. A resume must still be exact."""
        if self.store is None:
            return
        for name in sorted(self.store.logs):
            log_data = self.store.logs[name]
            if not log_data:
                continue
            del log_data[self.rng.randrange(len(log_data) // 2, len(log_data) + 1) :]
            for _ in range(flips if log_data else 0):
                log_data[self.rng.randrange(len(log_data))] ^= 1 << self.rng.randrange(8)

    async def _resume(self, client: Any) -> None:
        """Ask the first live peer to resume the run from the checkpoints (`satind resume`)."""
        live = sorted(self.live())
        if not live or not self.run_id or self.store is None:
            return
        contents = await self.store.load()
        results = contents.results.get(self.run_id, {})
        self.results_checkpointed = len(results)
        self.leaves_before = {leaf for (run, leaf) in self.leaves if run == self.run_id}
        for path in results:
            prefix = tuple(path_indices(path))
            self.checkpointed_leaves |= {
                leaf
                for (run, leaf) in self.leaves
                if run == self.run_id and leaf[: len(prefix)] == prefix
            }
        self.resumed_at = trio.current_time()
        self.master = live[0]
        self.trace("resume", self.master.encode())
        client.post(self.master, m.ResumeRequest(3, self.run_id))

    def _expand(self, side: tuple[str, ...]) -> set[str]:
        out = set()
        for item in side:
            if item in self.scenario.clusters:
                out |= {n for n in self.peers if n.rsplit("/", 1)[0] == item}
            else:
                out.add(self.slots.get(item, item))
        return out
