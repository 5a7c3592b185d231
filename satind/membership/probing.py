"""Probing (SWIM with Lifeguard, after hashicorp/memberlist's state.go and awareness.go): a
shuffled round robin of targets, a ping, indirect pings through ``indirect_checks`` others
(who relay the ack or send a nack), local health raised by failures and missed nacks; the
target is suspected when nothing came back. Also the answers to others' probes."""

from __future__ import annotations

import logging

import trio

from satind.membership.rules import health_delta, scale_by_health
from satind.membership.spreading import Spreading
from satind.membership.state import Link
from satind.membership.view import MEASURE_WEIGHT, State
from satind.net import messages as m

# The failure detector logs under one name, whichever of its modules speaks (as before they
# were split out of swim.py).
log = logging.getLogger("satind.membership.swim")


class Probing(Spreading):
    """Probes members and answers probes."""

    def _piggyback_for(self, target: str) -> m.Broadcasts:
        """Lifeguard's buddy system: a ping to a member we suspect carries the suspicion
        first, so the member learns of it at once and refutes, instead of depending on gossip
        reaching it before the suspicion expires."""
        gossip = self.piggyback()
        known = self.table.get(target)
        if known is None or known.state != State.SUSPECT:
            return gossip
        return m.Broadcasts([known.update(), *gossip.members], gossip.runs, gossip.tuples)

    def on_ping(self, link: Link, msg: m.Ping) -> None:
        self._receive(msg.gossip)
        self._learn_about(link)
        if msg.target != self.me.name:
            log.debug("ping for %s reached %s", msg.target, self.me.name)
            return
        gossip = self.piggyback()
        if any(u.name == self.me.name and u.state != "alive" for u in msg.gossip.members):
            # The prober still suspects us, perhaps at an incarnation we already refuted and
            # whose refutation gossip never brought it: answer with our current word.
            gossip = m.Broadcasts([self.me.update(), *gossip.members], gossip.runs, gossip.tuples)
        link.post(m.Ack(msg.seq, gossip))

    def on_ack(self, link: Link, msg: m.Ack) -> None:
        self._receive(msg.gossip)
        event = self._acks.get(msg.seq)
        if event is not None:
            event.set()
        relay = self._relays.pop(msg.seq, None)
        if relay is not None:
            asker, their_seq = relay
            self.host.post(asker, m.Ack(their_seq, self.piggyback()))

    def _learn_about(self, link: Link) -> None:
        """A member we do not know, or believe dead, probes us: gossip passed one of us by.
        Sync state with it (once a probe interval at most) instead of waiting for the periodic
        sync: it learns it was declared dead and refutes, or we learn it exists."""
        sender = link.remote_name
        known = self.table.get(sender)
        if known is not None and known.state != State.DEAD:
            return
        now = self.clock()
        if now - self._asked.get(sender, -1e9) < self.cfg.probe_interval_s:
            return
        self._asked[sender] = now
        link.post(self.state_message(join=False, reply=False))

    def _measured(self, target: str, rtt: float) -> None:
        """A direct ack's round trip (the last few weigh most: links change)."""
        rtts = self.table.rtt_s
        last = rtts.get(target)
        rtts[target] = rtt if last is None else last + MEASURE_WEIGHT * (rtt - last)

    def on_nack(self, link: Link, msg: m.Nack) -> None:
        if msg.seq in self._nacks:
            self._nacks[msg.seq] += 1

    def on_ping_req(self, link: Link, msg: m.PingReq) -> None:
        seq = next(self._seq)
        self._relays[seq] = (link.remote_name, msg.seq)
        self.host.post(msg.target, m.Ping(seq, msg.target, self.piggyback()))
        if self._nursery is not None:
            self._nursery.start_soon(self._nack_later, seq)

    async def _nack_later(self, seq: int) -> None:
        await trio.sleep(scale_by_health(self.cfg.probe_timeout_s, self.health))
        relay = self._relays.pop(seq, None)
        if relay is not None:
            asker, their_seq = relay
            self.host.post(asker, m.Nack(their_seq))

    def _next_target(self) -> str | None:
        while True:
            if not self._order:
                me = self.me.name
                self._order = [m.name for m in self.table.alive() if m.name != me]
                self.rng.shuffle(self._order)
                if not self._order:
                    return None
            name = self._order.pop()
            member = self.table.get(name)
            if member is not None and member.alive:
                return name

    async def _probe_loop(self) -> None:
        await self._jitter(self.cfg.probe_interval_s)
        while True:
            started = self.clock()
            interval = scale_by_health(self.cfg.probe_interval_s, self.health)
            target = self._next_target()
            if target is not None:
                await self._probe(target, started + interval)
            await trio.sleep_until(started + interval)

    async def _probe(self, target: str, deadline: float) -> None:
        seq = next(self._seq)
        acked = trio.Event()
        self._acks[seq] = acked
        self._nacks[seq] = 0
        helpers: list[str] = []
        try:
            self.probes_sent += 1
            sent = self.clock()
            self.host.post(target, m.Ping(seq, target, self._piggyback_for(target)))
            with trio.move_on_after(scale_by_health(self.cfg.probe_timeout_s, self.health)):
                await acked.wait()
            if acked.is_set():
                self._measured(target, self.clock() - sent)
            else:
                skip = (self.me.name, target)
                others = [
                    m.name
                    for m in self.table.alive()
                    if m.name not in skip and m.state == State.ALIVE
                ]
                helpers = self.rng.sample(others, min(self.cfg.indirect_checks, len(others)))
                for helper in helpers:
                    self.host.post(helper, m.PingReq(seq, target))
                with trio.move_on_at(deadline):
                    await acked.wait()
        finally:
            self._acks.pop(seq, None)
            nacks = self._nacks.pop(seq, 0)
        delta = health_delta(acked.is_set(), len(helpers), nacks)
        self.health = max(0, min(self.cfg.awareness_max, self.health + delta))
        if not acked.is_set():
            self.suspect(target)
