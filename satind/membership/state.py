"""What the parts of the SWIM failure detector share (``membership/swim.py`` puts them
together): the host it serves, the link a message came on, and its state — the member table,
the broadcast queue, local health, probes in flight, suspicions and tombstones."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from typing import Protocol

import trio

from satind.config import MembershipConfig
from satind.membership.gossip import Dissemination
from satind.membership.rejoin import Rejoin
from satind.membership.rules import Suspicion
from satind.membership.seeds import Resolver, system_resolver
from satind.membership.view import Change, Member, MemberTable
from satind.net import messages as m
from satind.net.parties import Address


class SwimHost(Protocol):
    """What the failure detector needs from its peer."""

    def post(self, dest: str, msg: m.Message) -> bool: ...

    def post_address(self, address: Address, msg: m.Message, quiet: bool = False) -> None:
        """Send to an address whose member name we do not know yet (a seed). ``quiet``: a
        failed dial is not worth a line at INFO (a reconnect to a dark address)."""
        ...

    def on_member_change(self, change: Change) -> None: ...

    def on_runs(self, runs: Sequence[m.RunAnnounce]) -> None: ...

    def on_synced(self) -> None:
        """The member view is whole: a state sync answered ours, or we are the first."""

    def on_tuples(self, tuples: Sequence[m.OrphanTuple]) -> None: ...

    def run_announcements(self) -> list[m.RunAnnounce]: ...


class Link(Protocol):
    """Where a message came from, and how to answer on the same connection."""

    @property
    def remote_name(self) -> str: ...

    def post(self, msg: m.Message) -> None: ...


class SwimState:
    """The failure detector's state, and the helpers every part uses."""

    def __init__(
        self,
        cfg: MembershipConfig,
        table: MemberTable,
        host: SwimHost,
        rng: random.Random,
        clock: Callable[[], float] = trio.current_time,
        resolve: Resolver = system_resolver,
    ) -> None:
        self.cfg = cfg
        self.table = table
        self.host = host
        self.rng = rng
        self.clock = clock
        # How a seed's host name becomes addresses (membership/seeds.py; tests pass a fake).
        self.resolve = resolve
        self.dissemination = Dissemination(cfg.retransmit_mult, cfg.gossip_max_items)
        self.health = 0
        self._seq = itertools.count(1)
        self._acks: dict[int, trio.Event] = {}
        self._nacks: dict[int, int] = {}
        # Indirect probes we run for others: our seq -> (who asked, their seq).
        self._relays: dict[int, tuple[str, int]] = {}
        self._suspicions: dict[str, Suspicion] = {}
        self._gone_since: dict[str, float] = {}
        self._order: list[str] = []
        self._joined = trio.Event()
        # Whether a full state sync answered ours (or we are the first member): from then on
        # this peer's view holds every member of the system, not just those gossip brought.
        self.synced = False
        self._suspicions_changed = trio.Event()
        self._asked: dict[str, float] = {}
        self._nursery: trio.Nursery | None = None
        self.probes_sent = 0
        # Finding the system again after a restart or a partition (membership/rejoin.py).
        # Its own generator, seeded by our name: the failure detector's draws stay as they
        # were.
        self.rejoin = Rejoin(cfg, table.me.name, random.Random(table.me.name), clock)

    @property
    def me(self) -> Member:
        return self.table.me

    # -- helpers of every part -----------------------------------------------------------------

    def _broadcast(self, update: m.MemberUpdate) -> None:
        self.dissemination.add_member(update)

    async def _jitter(self, interval: float) -> None:
        # Every periodic loop starts at a random phase, so peers do not tick in step.
        await trio.sleep(self.rng.random() * interval)
