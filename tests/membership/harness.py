"""Many SWIM members in one trio run over the in-memory network."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import trio

from satind.config import MembershipConfig
from satind.membership.swim import Swim
from satind.membership.view import Change, Member, MemberTable, State
from satind.net import messages as m
from satind.net.memory import LinkFaults, MemoryLink, MemoryNetwork, MemoryTransport
from satind.net.transport import Address, Identity


@dataclass
class Node:
    name: str
    swim: Swim
    transport: MemoryTransport
    changes: list[Change] = field(default_factory=list)
    cancel: trio.CancelScope = field(default_factory=trio.CancelScope)

    # SwimHost
    def post(self, dest: str, msg: m.Message) -> bool:
        return self.transport.post(dest, msg)

    def post_address(self, address: Address, msg: m.Message, quiet: bool = False) -> None:
        self.transport.post_address(address, msg, quiet)

    def on_member_change(self, change: Change) -> None:
        self.changes.append(change)

    def on_runs(self, runs: Sequence[m.RunAnnounce]) -> None:
        pass

    def run_announcements(self) -> list[m.RunAnnounce]:
        return []

    def on_tuples(self, tuples: Sequence[m.OrphanTuple]) -> None:
        pass

    def on_synced(self) -> None:
        pass

    def handle(self, link: MemoryLink, msg: m.Message) -> None:
        handlers = {
            m.Ping: self.swim.on_ping,
            m.Ack: self.swim.on_ack,
            m.Nack: self.swim.on_nack,
            m.PingReq: self.swim.on_ping_req,
            m.PushPull: self.swim.on_push_pull,
            m.Gossip: self.swim.on_gossip,
        }
        handlers[type(msg)](link, msg)  # type: ignore[operator]

    def view(self) -> dict[str, str]:
        return {mem.name: mem.state.label for mem in self.swim.table.everyone()}


class Cluster:
    def __init__(self, network: MemoryNetwork, cfg: MembershipConfig, seed: int) -> None:
        self.network = network
        self.cfg = cfg
        self.rng = random.Random(seed)
        self.nodes: dict[str, Node] = {}

    def address(self, i: int) -> Address:
        return Address("10.0.0.1", 7000 + i)

    async def start(
        self, nursery: trio.Nursery, i: int, cluster: str = "c0", instance: int = 0
    ) -> Node:
        """Member ``n{i}`` (slot ``n{i}``); ``instance``: a process of that slot started
        later, named ``n{i}#INSTANCE`` (a restart at the same address)."""
        name = f"n{i}#{instance}" if instance else f"n{i}"
        me = Member(name, self.address(i), cluster, instance=instance or 1000 + i)
        table = MemberTable(me)
        holder: list[Node] = []
        transport = self.network.attach(
            Identity(name, cluster, "peer"),
            me.address,
            lambda link, msg: holder[0].handle(link, msg),
        )
        swim = Swim(self.cfg, table, None, random.Random(self.rng.random()))  # type: ignore[arg-type]
        node = Node(name, swim, transport)
        swim.host = node
        holder.append(node)
        self.nodes[name] = node

        async def run() -> None:
            with node.cancel:
                await swim.run()

        nursery.start_soon(run)
        return node

    def crash(self, name: str) -> None:
        self.network.detach(name)
        self.nodes[name].cancel.cancel()

    def agree(self, name: str, state: str, among: Sequence[str] | None = None) -> bool:
        names = among if among is not None else [n for n in self.nodes if n != name]
        return all(self.nodes[n].view().get(name) == state for n in names)

    def converged(self, alive: Sequence[str]) -> bool:
        return all(
            sorted(k for k, v in self.nodes[n].view().items() if v in ("alive", "suspect"))
            == sorted(alive)
            for n in alive
        )

    async def wait_until(self, predicate: object, limit: float, step: float = 0.05) -> float:
        """Virtual seconds until ``predicate()`` holds; raises TooSlowError after ``limit``."""
        start = trio.current_time()
        with trio.fail_after(limit):
            # Polling the virtual clock: it costs no wall time under MockClock.
            while not predicate():  # type: ignore[operator]  # noqa: ASYNC110
                await trio.sleep(step)
        return trio.current_time() - start


async def start_cluster(
    nursery: trio.Nursery,
    n: int,
    seed: int,
    cfg: MembershipConfig,
    faults: LinkFaults | None = None,
) -> Cluster:
    """``n`` members over a seeded in-memory network: n0 starts the system, the others join
    through it (not waited for)."""
    network = MemoryNetwork(random.Random(seed), faults)
    nursery.start_soon(network.run)
    cluster = Cluster(network, cfg, seed)
    first = await cluster.start(nursery, 0)
    assert await first.swim.join([])
    for i in range(1, n):
        node = await cluster.start(nursery, i)
        nursery.start_soon(node.swim.join, [cluster.address(0)])
    return cluster


__all__ = ["Cluster", "Node", "State", "start_cluster"]
