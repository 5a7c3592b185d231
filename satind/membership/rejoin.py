"""Finding the system again: after a restart, a partition, or a join that found nobody.

SWIM alone never merges two sides that have declared each other dead: nobody probes the dead,
and gossip reaches them only for ``gossip_to_dead_s``. And a restarted process is a new member
(membership/view.py) that knows only its seeds: the first machine of a system, started without
any, restarted alone — while the others dialled the old process's address, met the new one
under another name and hung up (net/transport.py refuses a name it did not dial). The system
stayed in two pieces, silently. Three mechanisms, as HashiCorp's Serf layers them over
memberlist, close every such gap:

* **Another instance answered** (``met_other``): a dial to a member's address that the new
  process of the same slot answered is news, not a failure. The dialler sends that address a
  state sync (push-pull): the newcomer learns the whole system, and its answer brings its own
  entry, whose newer instance buries the old one (membership/view.py). At most once per
  ``probe_interval_s`` per address.
* **Reconnect** (Serf's reconnect loop): every ``reconnect_interval_s`` a member sends a state
  sync to one address, drawn at random, of a slot it saw alive within ``reconnect_timeout_s``
  and now believes dead or gone (left ones too: `satind stop` and a later `satind start` is an
  operator's everyday restart, not a decommission), and, while no member of another machine is
  alive in its view, to its seeds and the addresses it remembered. Whoever answers there
  merges: a healed partition's far side learns it was declared dead and refutes, a restarted
  machine learns the system. The dials are quiet (DEBUG): an address that stays dark costs one
  refused or timed-out connection per interval, not a log line.
* **Remembered members** (Serf's snapshot, memberlist users' peers file): the node keeps the
  addresses of the members it last saw alive in its state directory (node/remember.py) and
  joins through them after a restart, beside its seeds; when none answers within
  ``rejoin_timeout_s`` and it has no seeds of its own, it starts on its own, says so at
  WARNING, and goes on reconnecting.

A member that sees no other machine's peer alive for ``split_warning_s`` while it knows where
some were logs a WARNING saying so and what to check (the advertised address, the network), once
per ``split_warning_s``: a split that cannot heal is never silent.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from satind.config import MembershipConfig
from satind.membership.view import Member, MemberTable
from satind.net.names import slot_of
from satind.net.parties import Address

log = logging.getLogger("satind.membership.swim")  # the failure detector's one name

# count. Slots remembered for reconnecting, at most (the oldest seen go first).
MAX_PLACES = 10_000


@dataclass
class Place:
    """Where a slot's process was last seen alive, and when."""

    address: Address
    seen_at: float


def node_of(slot: str) -> str:
    """The machine of a slot (``b/0`` -> ``b``)."""
    return slot_of(slot).split("/")[0]


class Rejoin:
    """The three mechanisms above, for one member. ``sync(address)`` sends that address a state
    sync (the failure detector's push-pull); ``now()`` is the failure detector's clock."""

    def __init__(
        self,
        cfg: MembershipConfig,
        me: str,
        rng: random.Random,
        now: Callable[[], float],
    ) -> None:
        self.cfg = cfg
        self.me = me
        self.rng = rng
        self.now = now
        self.sync: Callable[[Address], None] = lambda address: None
        # slot -> where its process was last seen alive.
        self.places: dict[str, Place] = {}
        # Seeds and remembered addresses: tried while no other machine is in sight.
        self.seeds: list[Address] = []
        self._synced_at: dict[Address, float] = {}
        self._alone_since: float | None = None
        self._warned_at = -1e18
        self.attempts = 0

    # -- what it learns --------------------------------------------------------------------

    def seen(self, member: Member) -> None:
        """A member changed: alive, remember where its slot is; gone, remember it too if it
        was not yet (a member known from the start, never news until it went)."""
        if member.name == self.me or (not member.alive and member.slot in self.places):
            return
        self.places[member.slot] = Place(member.address, self.now())
        if len(self.places) > MAX_PLACES:
            oldest = min(self.places, key=lambda s: self.places[s].seen_at)
            del self.places[oldest]

    def remember(self, addresses: Iterable[Address]) -> None:
        """Addresses to try while alone: the seeds, and what the node remembered."""
        for address in addresses:
            if address not in self.seeds:
                self.seeds.append(address)

    # -- the mechanisms --------------------------------------------------------------------

    def met_other(self, address: Address, dialled: str, answered: str) -> bool:
        """A dial of member ``dialled`` at ``address`` was answered by ``answered``: when it
        runs in the same slot (a restart), sync state with it. Returns whether it did."""
        if slot_of(dialled) != slot_of(answered) or answered == self.me:
            return False
        now = self.now()
        if now - self._synced_at.get(address, -1e18) < self.cfg.probe_interval_s:
            return False
        self._synced_at[address] = now
        log.info(
            "%s answered at %s, where %s ran: a restart; syncing state with it",
            answered,
            address,
            dialled,
        )
        self.sync(address)
        return True

    def candidates(self, table: MemberTable) -> list[Address]:
        """Where a reconnect may go now: addresses of slots seen alive within
        ``reconnect_timeout_s`` whose newest known process is gone (or forgotten), and, while
        no other machine's member is alive here, the seeds and remembered addresses."""
        now = self.now()
        mine = table.me.address
        out: list[Address] = []
        for slot, place in self.places.items():
            if now - place.seen_at > self.cfg.reconnect_timeout_s or place.address == mine:
                continue
            newest = table.newest_in(slot)
            if newest is None or newest.state.gone:
                out.append(place.address)
        if not self.others_alive(table):
            live = {m.address for m in table.alive()}
            out += [a for a in self.seeds if a != mine and a not in live and a not in out]
        return out

    def others_alive(self, table: MemberTable) -> bool:
        """Whether a member of another machine than this one is alive in ``table``."""
        node = node_of(self.me)
        return any(node_of(m.name) != node for m in table.alive())

    def tick(self, table: MemberTable) -> Address | None:
        """One reconnect round: the address synced with (None: nothing to try). Also warns
        of a split that does not heal."""
        self._watch_split(table)
        choices = self.candidates(table)
        if not choices:
            return None
        address = self.rng.choice(choices)
        self._synced_at[address] = self.now()
        self.attempts += 1
        self.sync(address)
        return address

    def _watch_split(self, table: MemberTable) -> None:
        now = self.now()
        node = node_of(self.me)
        elsewhere = [p.address for s, p in self.places.items() if node_of(s) != node]
        if self.others_alive(table) or not (elsewhere or self.seeds):
            self._alone_since = None
            return
        if self._alone_since is None:
            self._alone_since = now
            return
        alone = now - self._alone_since
        if alone < self.cfg.split_warning_s or now - self._warned_at < self.cfg.split_warning_s:
            return
        self._warned_at = now
        known = sorted({str(a) for a in [*elsewhere, *self.seeds]})
        shown = ", ".join(known[:6]) + (f" and {len(known) - 6} more" if len(known) > 6 else "")
        log.warning(
            "%s has seen no peer of another machine alive for %.0f s, though it knew of %s; it "
            "keeps dialling them every %g s. If they run, this machine and they are split: "
            "check that they reach the address it gives them (%s: set --advertise if that is "
            "not it) and that nothing between them drops its traffic (a firewall, a cut link)",
            self.me,
            alone,
            shown,
            self.cfg.reconnect_interval_s,
            table.me.address,
        )
