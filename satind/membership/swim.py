"""SWIM failure detection with the Lifeguard refinements, gossip and push-pull (after
hashicorp/memberlist: state.go, suspicion.go, awareness.go).

* **Probe.** Every probe interval a member pings the next member of a shuffled round robin. No
  ack within the probe timeout: it asks ``indirect_checks`` others to ping the target
  (PingReq); they relay the ack, or a Nack when they got none. Still nothing at the end of the
  interval: the target is **suspect**.
* **Suspicion** lasts between ``suspicion_timeout`` and ``suspicion_max_mult`` times that,
  shrinking as independent members confirm it (Lifeguard), unless the suspect refutes it with
  a higher incarnation; then it is **dead**.
* **Local health** (Lifeguard awareness): failed probes and missed nacks raise a score, successes
  lower it; probe timeouts and intervals are scaled by (score + 1), so a peer that is itself
  slow (a long GIL hold, an overloaded machine) suspects others less eagerly.
* **Gossip.** Updates ride on every ping and ack and go out in gossip rounds to a few random
  members, each sent a limited number of times (gossip.py). Accepted news is re-gossiped, so it
  spreads epidemically.
* **Push-pull.** A joiner exchanges its full state with a seed; every member does the same with
  a random member now and then, repairing whatever gossip missed.
* **Leave.** A leaving member tells everyone it has left (not died) before it goes.

The decisions are the pure functions at the top; ``Swim`` only sleeps, sends and applies.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Callable, Sequence
from typing import Protocol

import trio

from satind.config import MembershipConfig
from satind.membership.gossip import Dissemination
from satind.membership.rules import Suspicion
from satind.membership.rules import health_delta as health_delta
from satind.membership.rules import push_pull_interval as push_pull_interval
from satind.membership.rules import remaining_suspicion_time as remaining_suspicion_time
from satind.membership.rules import scale_by_health as scale_by_health
from satind.membership.rules import suspicion_timeout as suspicion_timeout
from satind.membership.view import STATES, Change, Member, MemberTable, State
from satind.net import messages as m
from satind.net.transport import Address

log = logging.getLogger(__name__)

# -- the service -----------------------------------------------------------------------------


class SwimHost(Protocol):
    """What the failure detector needs from its peer."""

    def post(self, dest: str, msg: m.Message) -> bool: ...

    def post_address(self, address: Address, msg: m.Message) -> None:
        """Send to an address whose member name we do not know yet (a seed)."""
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


class Swim:
    def __init__(
        self,
        cfg: MembershipConfig,
        table: MemberTable,
        host: SwimHost,
        rng: random.Random,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self.cfg = cfg
        self.table = table
        self.host = host
        self.rng = rng
        self.clock = clock
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

    @property
    def me(self) -> Member:
        return self.table.me

    # -- state changes -----------------------------------------------------------------------

    def _broadcast(self, update: m.MemberUpdate) -> None:
        self.dissemination.add_member(update)

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
            log.info("member %s is %s", name, state.label)
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

    # -- message handlers (synchronous) --------------------------------------------------------

    def piggyback(self) -> m.Broadcasts:
        return self.dissemination.take(len(self.table))

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

    # -- the loops -----------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Probe, gossip, sync state and expire suspicions until cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._probe_loop)
                nursery.start_soon(self._gossip_loop)
                nursery.start_soon(self._push_pull_loop)
                nursery.start_soon(self._housekeeping_loop)
                task_status.started()
        finally:
            # Stopped (the peer left): a message handled after this starts no task here (a
            # PingReq delivered late to a drained peer raised "Nursery is closed").
            self._nursery = None

    async def _jitter(self, interval: float) -> None:
        # Every periodic loop starts at a random phase, so peers do not tick in step.
        await trio.sleep(self.rng.random() * interval)

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
            self.host.post(target, m.Ping(seq, target, self._piggyback_for(target)))
            with trio.move_on_after(scale_by_health(self.cfg.probe_timeout_s, self.health)):
                await acked.wait()
            if not acked.is_set():
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
        us dead in turn, hears of our refutations the same way."""
        now = self.clock()
        recent = [
            name
            for name, since in self._gone_since.items()
            if now - since < self.cfg.gossip_to_dead_s
            and (member := self.table.get(name)) is not None
            and member.state == State.DEAD
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

    # -- join and leave ------------------------------------------------------------------------

    async def join(self, seeds: Sequence[Address]) -> bool:
        """Exchange state with the seeds until one answers; False after join_timeout_s.

        No seeds (or only ourselves): we are the first member, nothing to wait for.
        """
        seeds = [s for s in seeds if s != self.me.address]
        if not seeds:
            self._synced()
            return True
        with trio.move_on_after(self.cfg.join_timeout_s):
            while not self._joined.is_set():
                for seed in seeds:
                    self.host.post_address(seed, self.state_message(join=True, reply=False))
                with trio.move_on_after(self.cfg.join_retry_s):
                    await self._joined.wait()
        if self._joined.is_set() and self._nursery is not None:
            self._nursery.start_soon(self._sync_after_join, seeds)
        return self._joined.is_set()

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

    def leave(self) -> None:
        """Tell every member we leave (not die), directly, and gossip it as well."""
        update = self.table.set_state_of_me(State.LEFT)
        self._broadcast(update)
        for member in self.table.alive():
            if member.name != self.me.name:
                self.host.post(member.name, m.Gossip(m.Broadcasts([update], [])))

    def set_plugins(self, plugins: dict[str, str]) -> None:
        """Gossip our new plugin list (name -> code hash): masters check it before a run."""
        self._broadcast(self.table.set_plugins_of_me(plugins))

    def set_draining(self) -> None:
        update = self.table.set_state_of_me(State.ALIVE, draining=True)
        self._broadcast(update)

    def set_reclaimed(self, reclaimed: bool) -> None:
        """Reclaimed by the machine's owner, or released: every member hears it at once."""
        self._broadcast(self.table.set_state_of_me(State.ALIVE, reclaimed=reclaimed))
