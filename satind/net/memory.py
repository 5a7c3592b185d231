"""An in-memory network for tests and the simulator: the same messages, no sockets.

Every message is encoded and decoded with the real codec (so the simulator exercises the wire
format and counts real bytes) and delivered after a delay. Faults come from a seeded
``random.Random``: per-message drop and duplication, extra jitter (which reorders), and
partitions that cut all traffic between two sets of parties. Run the network's delivery loop
in a nursery; with trio's MockClock, delays cost no wall time.

A cluster's uplink can be given a bandwidth (``set_uplink``, the simulator's "bandwidth"
fault): every wide-area message between peers into or out of that cluster is then serialized
through a queue per direction, as on a site's thin wide-area link: it leaves at
``max(now, link free) + size / bytes_per_s`` and arrives the wide latency later. A message
between two limited clusters passes the sender's out-queue, then the receiver's in-queue
(store and forward, the latency counted once, at the end). Local traffic, and a client's
messages, are not paced.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass

import trio

from satind.config import NetConfig
from satind.net import codec
from satind.net import messages as m
from satind.net.framing import handle_frame
from satind.net.parties import Address, Identity, TrafficCounters


@dataclass
class LinkFaults:
    """How the network treats messages (all probabilities per message)."""

    latency_s: float = 0.0005
    wide_latency_s: float = 0.0005
    jitter_s: float = 0.0
    drop: float = 0.0
    duplicate: float = 0.0


class MemoryLink:
    """The sender of a delivered message, as the receiver sees it."""

    def __init__(self, transport: MemoryTransport, remote: Identity) -> None:
        self._transport = transport
        self.remote = remote

    @property
    def remote_name(self) -> str:
        return self.remote.name

    @property
    def measured(self) -> tuple[int, float] | None:
        return None  # no wire: nothing to measure (the simulator's links have no bandwidth)

    def post(self, msg: m.Message) -> bool:
        return self._transport.post(self.remote.name, msg)

    def close(self) -> None:
        """Messages have no connection to close here; the sender's next ones still arrive."""


MessageHandler = Callable[[MemoryLink, m.Message], None]


class MemoryTransport:
    def __init__(
        self, network: MemoryNetwork, identity: Identity, address: Address, handler: MessageHandler
    ) -> None:
        self.network = network
        self.identity = identity
        self.address = address
        self.handler = handler
        self.counters = TrafficCounters()
        self.attached = True

    async def run(
        self,
        listen: Address | None = None,
        *,
        task_status: trio.TaskStatus[Address | None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Nothing to listen on: report the address and wait (the network delivers)."""
        task_status.started(self.address)
        await trio.sleep_forever()

    def post(self, dest: str, msg: m.Message) -> bool:
        return self.network.send(self, dest, msg)

    def post_address(self, address: Address, msg: m.Message, quiet: bool = False) -> None:
        name = self.network.name_at(address)
        if name is None:
            self.counters.send_failures += 1
            return
        self.post(name, msg)


# A message on its way: (due time, sequence number, receiver, sender, bytes). A plain tuple,
# so the heap compares in C; the sequence number breaks ties in sending order.
_InFlight = tuple[float, int, str, Identity, bytes]


class MemoryNetwork:
    def __init__(
        self, rng: random.Random, faults: LinkFaults | None = None, net: NetConfig | None = None
    ) -> None:
        self.rng = rng
        self.faults = faults or LinkFaults()
        self.net = net or NetConfig()
        self._parties: dict[str, MemoryTransport] = {}
        self._addresses: dict[Address, str] = {}
        self._heap: list[_InFlight] = []
        self._seq = itertools.count()
        self._wake = trio.Event()
        # Pairs of party names that cannot reach each other (both directions).
        self._cut: set[frozenset[str]] = set()
        # Paused parties, and the messages they sent or were sent meanwhile (in order).
        self._held: dict[str, list[_InFlight]] = {}
        # Bandwidth of limited clusters' uplinks (bytes/s), and when each direction's queue,
        # (cluster, "in" | "out"), is next free (virtual time).
        self._uplinks: dict[str, float] = {}
        self._link_free: dict[tuple[str, str], float] = {}
        self.delivered = 0
        self.dropped = 0
        # Called with (sender, receiver, bytes) for every delivered message (the simulator's
        # trace).
        self.on_deliver: Callable[[str, str, bytes], None] | None = None

    def attach(
        self, identity: Identity, address: Address, handler: MessageHandler
    ) -> MemoryTransport:
        transport = MemoryTransport(self, identity, address, handler)
        self._parties[identity.name] = transport
        self._addresses[address] = identity.name
        return transport

    def detach(self, name: str) -> None:
        """The party is gone (crashed): it neither sends nor receives from now on."""
        transport = self._parties.pop(name, None)
        if transport is not None:
            transport.attached = False
            self._addresses.pop(transport.address, None)

    def name_at(self, address: Address) -> str | None:
        return self._addresses.get(address)

    def partition(self, side_a: set[str], side_b: set[str]) -> None:
        for a in side_a:
            for b in side_b:
                self._cut.add(frozenset((a, b)))

    def heal(self) -> None:
        self._cut.clear()

    def set_uplink(self, cluster: str, bytes_per_s: float | None) -> None:
        """Limit a cluster's wide-area link to ``bytes_per_s`` each way from now on; None
        lifts the limit. Messages already queued keep the times they were given.

        Raises:
            ValueError: ``bytes_per_s`` is not > 0.
        """
        if bytes_per_s is None:
            self._uplinks.pop(cluster, None)
            self._link_free.pop((cluster, "in"), None)
            self._link_free.pop((cluster, "out"), None)
            return
        if not bytes_per_s > 0:
            raise ValueError(f"bytes_per_s must be > 0, got {bytes_per_s!r}")
        self._uplinks[cluster] = bytes_per_s

    def _paced(self, src_cluster: str, dst_cluster: str, size: int) -> float:
        """When a wide-area message of ``size`` bytes sent now leaves the limited uplinks on
        its way (now if there are none); the queues it passes are busy until then."""
        at = trio.current_time()
        for key in ((src_cluster, "out"), (dst_cluster, "in")):
            rate = self._uplinks.get(key[0])
            if rate is not None:
                at = max(at, self._link_free.get(key, 0.0)) + size / rate
                self._link_free[key] = at
        return at

    def hold(self, name: str) -> None:
        """Pause a party: what it sends and what is sent to it waits (nothing is lost), as TCP
        holds the traffic of a process stopped by SIGSTOP."""
        self._held.setdefault(name, [])

    def release(self, name: str) -> None:
        """Resume a paused party: everything that waited flows now, in the order it was
        sent."""
        now = trio.current_time()
        for _, seq, dest, src, data in self._held.pop(name, []):
            heapq.heappush(self._heap, (now, seq, dest, src, data))
        self._wake.set()

    def send(self, sender: MemoryTransport, dest: str, msg: m.Message) -> bool:
        """Queue a message for delivery; False when there is no route at all. A message lost
        to a fault counts as sent (the sender cannot know), as on a real network."""
        if not sender.attached:
            return False
        data = codec.encode_message(msg)
        receiver = self._parties.get(dest)
        wide = receiver is not None and receiver.identity.cluster != sender.identity.cluster
        counters = sender.counters
        if wide:
            counters.messages_wide += 1
            counters.bytes_wide += len(data) + 4
        else:
            counters.messages_local += 1
            counters.bytes_local += len(data) + 4
        faults = self.faults
        if receiver is None:
            counters.send_failures += 1
            self.dropped += 1
            return False
        # Faults apply between peers; a client's link (the experimenter's probe) is reliable.
        faulty = sender.identity.role == "peer" and receiver.identity.role == "peer"
        if faulty and (
            (self._cut and frozenset((sender.identity.name, dest)) in self._cut)
            or (faults.drop and self.rng.random() < faults.drop)
        ):
            self.dropped += 1
            return True
        duplicate = faulty and faults.duplicate and self.rng.random() < faults.duplicate
        copies = 2 if duplicate else 1
        paced = wide and faulty and bool(self._uplinks)
        for _ in range(copies):
            delay = faults.wide_latency_s if wide else faults.latency_s
            if faults.jitter_s and faulty:
                delay += self.rng.random() * faults.jitter_s
            start = (
                self._paced(sender.identity.cluster, receiver.identity.cluster, len(data) + 4)
                if paced
                else trio.current_time()
            )
            item = (start + delay, next(self._seq), dest, sender.identity, data)
            held = self._held.get(sender.identity.name)
            if held is not None:
                held.append(item)  # sent while paused: it leaves when the sender resumes
                continue
            heapq.heappush(self._heap, item)
            if self._heap[0] is item:
                self._wake.set()  # a new earliest message: the delivery loop must wake sooner
        return True

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Deliver messages when they are due, until cancelled."""
        task_status.started()
        while True:
            if not self._heap:
                self._wake = trio.Event()
                await self._wake.wait()
                continue
            due = self._heap[0][0]
            if due > trio.current_time():
                self._wake = trio.Event()
                with trio.move_on_at(due):
                    await self._wake.wait()
                continue
            item = heapq.heappop(self._heap)
            _, _, dest, src, data = item
            held = self._held.get(dest)
            if held is not None:
                held.append(item)  # the receiver is paused: it reads this when it resumes
                continue
            receiver = self._parties.get(dest)
            if receiver is None or (self._cut and frozenset((src.name, dest)) in self._cut):
                self.dropped += 1
                continue
            if self.on_deliver is not None:
                self.on_deliver(src.name, dest, data)
            receiver.counters.messages_received += 1
            receiver.counters.bytes_received += len(data) + 4
            self.delivered += 1
            # Replies go from the receiver back to the sender. A frame that fails costs what
            # it costs on TCP (the transports share handle_frame); there is no connection to
            # close here.
            handle_frame(
                data, MemoryLink(receiver, src), receiver.handler, self.net, receiver.counters
            )
