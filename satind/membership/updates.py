"""Member updates applied (after hashicorp/memberlist's state.go and suspicion.go): news is
merged into the member table and re-gossiped, refutations made, suspicions started, confirmed
(Lifeguard: independent confirmations shorten them) and expired into deaths, and old
tombstones forgotten."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import trio

from satind.membership.rules import Suspicion, suspicion_timeout
from satind.membership.state import SwimState
from satind.membership.view import STATES, Change, Member, State
from satind.net import messages as m

# The failure detector logs under one name, whichever of its modules speaks (as before they
# were split out of swim.py).
log = logging.getLogger("satind.membership.swim")


class Updates(SwimState):
    """Applies member updates; runs the suspicions' timers."""

    def merge(
        self, updates: Sequence[m.MemberUpdate], from_push_pull: bool = False, sender: str = ""
    ) -> None:
        """Apply gossip (re-gossiping what is news) or a state sync from ``sender``.

        What a state sync teaches is not re-gossiped, except news about the sender itself (a
        joiner announcing itself): the rest is the sender's view, which it spreads itself, and
        state sync repeats. Re-gossiping it would make every joiner broadcast the whole member
        list — N joiners times N members times the retransmit limit.
        """
        for update in updates:
            if from_push_pull and update.state == "dead":
                # memberlist: a death learnt by state sync is only a suspicion, so that a
                # member that is in fact alive gets the chance to refute it.
                update = m.MemberUpdate(**{**update.__dict__, "state": "suspect", "origin": ""})
            self._merge_one(update, spread=not from_push_pull or update.name == sender)

    def _merge_one(self, update: m.MemberUpdate, spread: bool = True) -> None:
        known = self.table.get(update.name)
        if (
            known is not None
            and known.incarnation == update.incarnation
            and known.instance == update.instance
            and known.draining == update.draining
            and known.reclaimed == update.reclaimed
            and known.state is STATES.get(update.state)
            and update.state != "suspect"
        ):
            return  # old news, by far the most common case under gossip: nothing to do
        if (
            update.state == "suspect"
            and known is not None
            and known.state == State.SUSPECT
            and known.incarnation == update.incarnation
            and known.instance == update.instance
        ):
            self._confirm(update)
            return
        try:
            changes, refutation = self.table.apply(update)
        except KeyError:
            log.warning("ignoring member update with unknown state %r", update.state)
            return
        if refutation is not None:
            log.info("refuting %s about us (incarnation now %d)", update.state, self.me.incarnation)
            self.health = min(self.cfg.awareness_max, self.health + 1)
            self._broadcast(refutation)
        for change in changes:
            if change.after.name != update.name or change.after.state.label != update.state:
                # An older instance of a slot, dead because a newer one appeared (or news of
                # it came after its replacement): its death is the news to spread.
                log.info("member %s is replaced by a newer instance", change.after.name)
                self._broadcast(change.after.update())
            elif spread:
                self._broadcast(update)
            self._track(change, update)
            self.rejoin.seen(change.after)
            self.host.on_member_change(change)
        if changes and not self._joined.is_set() and len(self.table) > 1:
            self._joined.set()

    def _track(self, change: Change, update: m.MemberUpdate) -> None:
        name = change.after.name
        state = change.after.state
        if state == State.SUSPECT:
            self._start_suspicion(change.after, update.origin)
        else:
            self._suspicions.pop(name, None)
        if state.gone:
            self._gone_since.setdefault(name, self.clock())
            # News of a member this peer never saw alive (a fresh daemon hears of the one
            # that ran at its address before) is history, not an event: not at INFO.
            seen = change.before is not None and not change.before.state.gone
            log.log(logging.INFO if seen else logging.DEBUG, "member %s is %s", name, state.label)
        else:
            self._gone_since.pop(name, None)

    def _start_suspicion(self, member: Member, origin: str) -> None:
        n = len(self.table)
        low = suspicion_timeout(self.cfg.suspicion_mult, n, self.cfg.probe_interval_s)
        high = self.cfg.suspicion_max_mult * low
        expected = self.cfg.suspicion_mult - 2
        if n - 2 < expected:
            expected = 0  # too few members to expect confirmations
        suspicion = Suspicion(member.incarnation, self.clock(), low, high, expected)
        if origin and origin != self.me.name:
            suspicion.confirmers.add(origin)
        self._suspicions[member.name] = suspicion
        self._suspicions_changed.set()

    def _confirm(self, update: m.MemberUpdate) -> None:
        suspicion = self._suspicions.get(update.name)
        if suspicion is None or not update.origin or update.origin in suspicion.confirmers:
            return
        suspicion.confirmers.add(update.origin)
        self._suspicions_changed.set()
        self._broadcast(update)  # spread the confirmation: others shorten their timers too

    def suspect(self, name: str) -> None:
        """Our own probe failed: suspect ``name`` at its current incarnation."""
        member = self.table.get(name)
        if member is None or member.state != State.ALIVE:
            return
        log.info("suspecting %s", name)
        self._merge_one(member.update(State.SUSPECT, origin=self.me.name))

    def _expire_suspicions(self) -> None:
        now = self.clock()
        for name, suspicion in list(self._suspicions.items()):
            if now < suspicion.deadline():
                continue
            del self._suspicions[name]
            member = self.table.get(name)
            if (
                member is not None
                and member.state == State.SUSPECT
                and member.incarnation == suspicion.incarnation
            ):
                log.info("member %s is dead (suspected for %.1f s)", name, now - suspicion.started)
                self._merge_one(member.update(State.DEAD, origin=self.me.name))

    def _forget_old_tombstones(self) -> None:
        now = self.clock()
        old = [n for n, t in self._gone_since.items() if now - t > self.cfg.tombstone_s]
        for name in old:
            del self._gone_since[name]
        self.table.forget_gone(old)

    async def _housekeeping_loop(self) -> None:
        """Expire suspicions when they are due (woken early when one starts or is confirmed,
        since that moves the earliest deadline), and forget old tombstones now and then."""
        sweep = min(self.cfg.tombstone_sweep_s, self.cfg.tombstone_s)
        next_sweep = self.clock() + sweep
        while True:
            deadlines = [s.deadline() for s in self._suspicions.values()]
            wake_at = min([next_sweep, *deadlines])
            self._suspicions_changed = trio.Event()
            with trio.move_on_at(wake_at):
                await self._suspicions_changed.wait()
            self._expire_suspicions()
            if self.clock() >= next_sweep:
                self._forget_old_tombstones()
                next_sweep = self.clock() + sweep
