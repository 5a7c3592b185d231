"""Building a simulated peer: a real ``Peer`` on the in-memory network, its compute side the
lockstep driver, its address and name from its cluster; and the peers a coordinator asks
for (``provision``)."""

from __future__ import annotations

import functools
from typing import Any

import trio

from satind.net.memory import MemoryNetwork
from satind.net.names import peer_name
from satind.net.transport import Address
from satind.node.checkpoint import MemoryStore
from satind.node.peer import Peer, PeerOptions
from satind.sim.lockstep import LockstepCompute
from satind.sim.state import SimState
from satind.sim.workload import PLUGIN


class PeerStarter(SimState):
    """Starts the simulation's peers."""

    def _address(self, name: str) -> Address:
        cluster, index = name.rsplit("/", 1)
        cluster_no = (
            sorted(self.scenario.clusters).index(cluster)
            if cluster in self.scenario.clusters
            else 250
        )
        return Address(f"10.{cluster_no}.{int(index) // 250}.{int(index) % 250 + 1}", 7420)

    def _new_name(self, cluster: str) -> str:
        index = self._next_index[cluster]
        self._next_index[cluster] += 1
        return f"{cluster}/{index}"

    def _provision(
        self, nursery: trio.Nursery, network: MemoryNetwork, cluster: str, count: int
    ) -> None:
        async def join() -> None:
            for _ in range(count):
                alive = self.live()
                seeds = [
                    self.peers[n].options.listen for n in self.rng.sample(alive, min(3, len(alive)))
                ]
                await self.start_peer(nursery, network, cluster, seeds)

        nursery.start_soon(join)

    async def start_peer(
        self,
        nursery: trio.Nursery,
        network: MemoryNetwork,
        cluster: str,
        seeds: list[Address],
        standby: bool = False,
        slot: str = "",
    ) -> Peer:
        """Start a peer: a new one in ``cluster``, or a new instance in ``slot`` (a restart:
        same address, a newer instance)."""
        slot = slot or self._new_name(cluster)
        instance = len(self.peers) + 1
        name = peer_name(slot, instance)
        self.slots[slot] = name
        options = PeerOptions(
            name=slot,
            cluster=cluster,
            listen=self._address(slot),
            seeds=seeds,
            seed=self.rng.getrandbits(64),
            instance=instance,
            plugins={
                PLUGIN.name: PLUGIN,
                **self.run_plugins,
                **({} if self.plugin is None else {self.plugin.name: self.plugin}),
            },
            run_ids=lambda: next(self._run_ids),
            wall_offset=0.0,
            checkpoint_store=(
                self.stores.setdefault(slot, MemoryStore(slot)) if self.local_logs else self.store
            ),
            standby=standby,
        )

        def compute(hooks: Any) -> LockstepCompute:
            driver = LockstepCompute(
                self.cfg.engine,
                hooks,
                functools.partial(self._on_leaf, name),
                max_frame=self.cfg.net.max_frame_bytes,
                value_depth=self.cfg.net.max_depth,
            )
            driver.speed = self.scenario.speeds.get(cluster, 1.0)
            self.workers[name] = driver
            return driver

        peer = Peer(self.cfg, options, transport=network.attach, compute=compute)
        assert peer.name == name
        self.peers[name] = peer
        # [adapt] provision_command in the simulator: new peers join the coordinator's cluster
        # (a real one runs the command; here nothing outside the simulation may run).
        peer.coordinator.provision = functools.partial(self._provision, nursery, network, cluster)
        scope = trio.CancelScope()
        self.scopes[name] = scope

        async def run() -> None:
            with scope:
                await peer.run()
            if not scope.cancelled_caught:
                self.gone.add(name)  # it stopped by itself: drained and left
                self.left_at[name] = trio.current_time()
                if self.waits_on([name]) and self.client is not None:
                    self._follow(self.client)

        nursery.start_soon(run)
        return peer
