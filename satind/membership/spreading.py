"""How news spreads (after hashicorp/memberlist's broadcast.go and state.go): piggybacked on
pings and acks, in gossip rounds to a few random members (and to the recently dead, so that
they can refute), and by push-pull state exchange — the periodic one, and the joiner's with
its seeds."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import trio

from satind.membership.rules import push_pull_interval
from satind.membership.seeds import resolve_seeds
from satind.membership.state import Link
from satind.membership.updates import Updates
from satind.membership.view import State
from satind.net import messages as m
from satind.net.parties import Address

log = logging.getLogger("satind.membership.swim")  # the failure detector's one name


class Spreading(Updates):
    """Gossip, push-pull and join."""

    def piggyback(self) -> m.Broadcasts:
        return self.dissemination.take(len(self.table))

    def on_push_pull(self, link: Link, msg: m.PushPull) -> None:
        self.merge(msg.members, from_push_pull=True, sender=link.remote_name)
        if msg.reply and not self.synced:
            self._synced()
        self.host.on_runs(msg.runs)
        if not msg.reply:
            link.post(self.state_message(join=False, reply=True))

    def on_gossip(self, link: Link, msg: m.Gossip) -> None:
        self._receive(msg.gossip)

    def _receive(self, gossip: m.Broadcasts) -> None:
        if gossip.members:
            self.merge(gossip.members)
        if gossip.runs:
            self.host.on_runs(gossip.runs)
        if gossip.tuples:
            self.host.on_tuples(gossip.tuples)

    def state_message(self, join: bool, reply: bool) -> m.PushPull:
        return m.PushPull(join, reply, self.table.updates(), self.host.run_announcements())

    async def _gossip_loop(self) -> None:
        await self._jitter(self.cfg.gossip_interval_s)
        while True:
            await trio.sleep(self.cfg.gossip_interval_s)
            if not self.dissemination.pending():
                # Nothing to spread: sleep until something is queued instead of ticking (most
                # of the time a system has no news, and idle ticks are what idle CPU is made of).
                self.dissemination.wakeup = trio.Event()
                await self.dissemination.wakeup.wait()
                continue
            others = self._gossip_targets()
            for name in self.rng.sample(others, min(self.cfg.gossip_nodes, len(others))):
                member = self.table.get(name)
                if member is not None and member.state == State.DEAD:
                    # A member we believe dead gets only the news it can act on, its own
                    # death (to refute it): sends to the dead must not use up the retransmit
                    # budget of the updates the living need.
                    self.host.post(name, m.Gossip(m.Broadcasts([member.update()])))
                else:
                    self.host.post(name, m.Gossip(self.piggyback()))

    def _gossip_targets(self) -> list[str]:
        """Live members, and members declared dead less than gossip_to_dead_s ago (memberlist's
        GossipToTheDeadTime): a member wrongly declared dead — on the other side of a healed
        partition — only refutes once it hears of its death, and its own side, which may think
        us dead in turn, hears of our refutations the same way. Not an instance a newer one of
        its slot replaced: it cannot refute, and its address answers as the new one (each
        gossip was a refused dial and a line in the log, many a second after a few restarts)."""
        now = self.clock()
        recent = [
            name
            for name, since in self._gone_since.items()
            if now - since < self.cfg.gossip_to_dead_s
            and (member := self.table.get(name)) is not None
            and member.state == State.DEAD
            and not self.table.replaced(name)
        ]
        me = self.me.name
        return [m.name for m in self.table.alive() if m.name != me] + recent

    async def _push_pull_loop(self) -> None:
        await self._jitter(push_pull_interval(self.cfg.push_pull_interval_s, len(self.table)))
        while True:
            others = self._gossip_targets()
            if others:
                self.host.post(self.rng.choice(others), self.state_message(join=False, reply=False))
            await trio.sleep(push_pull_interval(self.cfg.push_pull_interval_s, len(self.table)))

    # -- join ----------------------------------------------------------------------------------

    async def join(self, seeds: Sequence[Address], remembered: Sequence[Address] = ()) -> bool:
        """Exchange state with the seeds until one answers; False after join_timeout_s.

        ``remembered``: members this peer's machine saw alive before it restarted
        (node/remember.py), tried beside the seeds. With no seeds of our own (the first
        machine), they are tried for ``rejoin_timeout_s`` only: none answered, we start on our
        own, say so, and the reconnect loop goes on trying them (membership/rejoin.py).

        No seeds (or only ourselves): we are the first member, nothing to wait for. A seed's
        host name is resolved again at each attempt, and the join goes to every address it
        gives but our own (membership/seeds.py says why). When the seeds gave our own address
        and never another until join_timeout_s (the first peer behind a name that lists every
        peer, such as a Kubernetes headless Service), we are the first member too. A name
        that never resolved is no such proof (DNS may be down): the join fails.
        """
        seeds = [s for s in seeds if s != self.me.address]
        remembered = [a for a in remembered if a != self.me.address and a not in seeds]
        self.rejoin.remember([*seeds, *remembered])
        if not seeds and not remembered:
            self._synced()
            return True
        me = self.me.address
        saw_me = saw_others = False
        addresses: list[Address] = []
        timeout = self.cfg.join_timeout_s if seeds else self.cfg.rejoin_timeout_s
        with trio.move_on_after(timeout):
            while not self._joined.is_set():
                found = await resolve_seeds([*seeds, *remembered], self.resolve)
                addresses = [a for a in found if a != me]
                saw_me = saw_me or me in found
                saw_others = saw_others or bool(addresses)
                for address in addresses:
                    self.host.post_address(address, self.state_message(join=True, reply=False))
                with trio.move_on_after(self.cfg.join_retry_s):
                    await self._joined.wait()
        if self._joined.is_set():
            if addresses and self._nursery is not None:
                self._nursery.start_soon(self._sync_after_join, addresses)
            return True
        if not seeds:
            log.warning(
                "none of the %d members this machine knew before it restarted answered in %g "
                "s (%s): starting on its own, and dialling them every %g s until one does",
                len(remembered),
                timeout,
                ", ".join(map(str, remembered[:6])),
                self.cfg.reconnect_interval_s,
            )
            self._synced()
            return True
        if saw_me and not saw_others:
            log.info(
                "the seeds %s name no peer but this one: starting the system",
                ", ".join(map(str, seeds)),
            )
            self._synced()
            return True
        return False

    async def joined(self) -> None:
        """Return once this member has met another (a join, or a reconnect after it)."""
        await self._joined.wait()

    def _synced(self) -> None:
        self.synced = True
        self.host.on_synced()

    async def _sync_after_join(self, seeds: Sequence[Address]) -> None:
        """One more state sync with a seed, a moment after joining.

        Members that joined at about the same time as us were announced by gossip while our
        own join was in flight; gossip does not re-send old news, and the periodic sync is far
        off. The seed saw every join that went through it, so one O(N) exchange with it closes
        that gap (it replaces re-gossiping every joiner's whole member list, which costs N
        times more).
        """
        await trio.sleep(self.cfg.sync_after_join_s)
        self.host.post_address(self.rng.choice(list(seeds)), self.state_message(False, False))
