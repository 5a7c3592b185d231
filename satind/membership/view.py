"""The member table: who is in the system, where, in which cluster, and in which state.

The rules for applying an update are SWIM's (Das et al.) as hashicorp/memberlist implements
them, as pure code over plain data:

* every member has an **incarnation** number that only it increments; an update about a member
  overrides what we know when its incarnation is higher, or equal with a stronger state
  (alive < suspect < dead/left);
* a member that hears itself suspected or declared dead refutes it by bumping its incarnation
  and announcing itself alive (``MemberTable.apply`` returns what to broadcast);
* a member that is **dead** or has **left** is never made alive again by an update of the same
  incarnation.

One addition: **a member is a process, not a name.** Each process has an ``instance`` (its
start time in nanoseconds), and its member name is its *slot* (``NODE/INDEX``, what the daemon
starts and restarts) with the instance appended (``b/0#k2j9x1``, net/names.py). Everything a
peer is responsible for — mastering a run, jobs it stole, orphans it holds, replicas, entities,
tasks — is recorded against that name, so it belongs to one process. When a newer instance of
a slot appears, the older one is declared dead on the spot (``MemberTable.apply`` returns its
death before the newcomer's arrival), and every recovery rule treats it exactly as a crash; the
newcomer starts empty and joins like any new member. A daemon that restarts a crashed peer at
the same address within a second (faster than SWIM could suspect the old one) therefore never
has the new process taken for the old.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Protocol

from satind.net.messages import MemberUpdate
from satind.net.names import slot_of
from satind.net.parties import Address


class State(IntEnum):
    """Member states, ordered by precedence at equal incarnation."""

    ALIVE = 0
    SUSPECT = 1
    DEAD = 2
    LEFT = 3

    @property
    def label(self) -> str:
        return self.name.lower()

    @property
    def gone(self) -> bool:
        return self >= State.DEAD


@dataclass(frozen=True)
class Member:
    name: str
    address: Address
    cluster: str
    state: State = State.ALIVE
    incarnation: int = 0
    instance: int = 0
    draining: bool = False
    # Reclaimed by its machine's owner (`satind reclaim`): alive, computing nothing until
    # released (scheduling-iterative-apps-volatile-resources' RECLAIMED state).
    reclaimed: bool = False
    # plugin name -> code hash: a master refuses a run some member has another version of.
    plugins: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def alive(self) -> bool:
        return self.state in (State.ALIVE, State.SUSPECT)

    @property
    def slot(self) -> str:
        return slot_of(self.name)

    def update(self, state: State | None = None, origin: str = "") -> MemberUpdate:
        """This member as a gossip update (with another state when given). The plugin list
        rides only on updates that say the member is alive: a suspicion or a death notice
        does not need it, and it is the bulk of an update.

        The member as it is (no other state, no origin) is built once per Member and shared
        (updates are frozen): a state sync after one change reuses the other members'
        updates, and the simulator's converged peers, which share their Members, build each
        one once instead of once per peer."""
        plain = state is None and not origin
        if plain:
            cached: MemberUpdate | None = self.__dict__.get("_update")
            if cached is not None:
                return cached
        state = state if state is not None else self.state
        update = MemberUpdate(
            name=self.name,
            host=self.address.host,
            port=self.address.port,
            cluster=self.cluster,
            state=state.label,
            incarnation=self.incarnation,
            instance=self.instance,
            draining=self.draining,
            reclaimed=self.reclaimed,
            plugins=dict(self.plugins) if state == State.ALIVE else {},
            origin=origin,
        )
        if plain:
            self.__dict__["_update"] = update  # a cache, not a field: replace() drops it
        return update


STATES = {s.label: s for s in State}


def member_from(update: MemberUpdate) -> Member:
    """Raises KeyError for an unknown state label."""
    return Member(
        name=update.name,
        address=Address(update.host, update.port),
        cluster=update.cluster,
        state=STATES[update.state],
        incarnation=update.incarnation,
        instance=update.instance,
        draining=update.draining,
        reclaimed=update.reclaimed,
        plugins=dict(update.plugins),
    )


@dataclass(frozen=True)
class Change:
    """What applying an update did to one member (for the failure detector and the recovery
    hooks). An older instance replaced by a newer one is a change of its own, to DEAD."""

    before: Member | None
    after: Member


class MembershipView(Protocol):
    """What the rest of a peer asks of membership."""

    @property
    def me(self) -> Member: ...

    def alive(self) -> Sequence[Member]:
        """Every member believed alive or suspect, this peer included, in name order."""
        ...

    def get(self, name: str) -> Member | None: ...


# The weight of the newest sample in a member's moving averages (round trip, bandwidth).
MEASURE_WEIGHT = 0.25
# seconds. A frame's bytes that came faster than this were read from a buffer (the reader
# was busy while they arrived): they say nothing of the link.
MIN_SAMPLE_S = 0.001


class MemberTable:
    """Every member this peer knows of, dead and left ones included (as tombstones)."""

    def __init__(self, me: Member) -> None:
        self._me = me
        self._members: dict[str, Member] = {me.name: me}
        # slot -> the newest instance known to run in it (alive or not): what decides that
        # news of an older one is stale, and that a newer one replaces it.
        self._slots: dict[str, Member] = {me.slot: me}
        # Members alive or suspect, kept up to date so that counting costs nothing, and their
        # sorted list, rebuilt only after a change (every probe and gossip round asks for it).
        self.alive_count = 1 if me.alive else 0
        self._alive: list[Member] | None = None
        self._updates: list[MemberUpdate] | None = None
        # Bumped on every change, so that views derived from the table can be cached.
        self.version = 0
        # Round trip of a direct probe to each member (seconds, a moving average, set by the
        # failure detector, membership/probing.py): the latency between this peer and that
        # member as measured (IOS's network profile, which core/spmd/ weighs).
        self.rtt_s: dict[str, float] = {}
        # Bytes per second from each member, a moving average of what large frames from it
        # measured (net/framing.py ``FrameReader.measured``; core/handle.py): IOS's bandwidth
        # between nodes. Absent: not measured (small messages only).
        self.bandwidth: dict[str, float] = {}
        self._bandwidth_sums: dict[str, tuple[float, float]] = {}  # averaged bytes, seconds
        # Told (name, slot) when a process started after us runs in our slot; the node logs it.
        self.on_usurped: Callable[[str, str], None] = lambda name, slot: None

    @property
    def me(self) -> Member:
        return self._me

    def _put(self, member: Member) -> None:
        old = self._members.get(member.name)
        self.alive_count += int(member.alive) - int(old is not None and old.alive)
        self._members[member.name] = member
        newest = self._slots.get(member.slot)
        if newest is None or newest.instance <= member.instance:
            self._slots[member.slot] = member
        self._alive = None
        self._updates = None
        self.version += 1

    def set_me(self, me: Member) -> None:
        self._me = me
        self._put(me)

    def get(self, name: str) -> Member | None:
        return self._members.get(name)

    def newest_in(self, slot: str) -> Member | None:
        """The newest instance known in ``slot`` (``b/0``), whatever its state."""
        return self._slots.get(slot)

    def replaced(self, name: str) -> bool:
        """Whether a newer instance of ``name``'s slot is known: the process ``name`` is dead
        for certain (its daemon starts a new one once the old one has ended)."""
        newest = self._slots.get(slot_of(name))
        return newest is not None and newest.name != name

    def named(self, name: str) -> Member | None:
        """What an operator means by ``name``: the member of that name (``b/0#k2j9x1``), or
        the newest instance in that slot (``b/0``)."""
        return self._members.get(name) or self._slots.get(name)

    def alive(self) -> list[Member]:
        """Members alive or suspect, by name. The list is shared: do not change it."""
        if self._alive is None:
            self._alive = [m for _, m in sorted(self._members.items()) if m.alive]
        return self._alive

    def everyone(self) -> list[Member]:
        return [m for _, m in sorted(self._members.items())]

    def current(self) -> list[Member]:
        """Every member but instances a newer one of their slot replaced: one per slot, what
        an operator asks about."""
        return [m for m in self.everyone() if self._slots[m.slot] is m]

    def updates(self) -> list[MemberUpdate]:
        """Every member as an update (what a state sync sends), built once per member change:
        with a thousand members a sync is a thousand of them."""
        if self._updates is None:
            self._updates = [m.update() for _, m in sorted(self._members.items())]
        return self._updates

    def __len__(self) -> int:
        return self.alive_count

    def apply(self, update: MemberUpdate) -> tuple[list[Change], MemberUpdate | None]:
        """Apply one update. Returns the changes it made, in order (an older instance of the
        slot declared dead comes before its replacement's arrival), and a refutation to
        broadcast when the update wrongly says this peer is not alive.

        Raises:
            KeyError: an unknown state label (the codec cannot check string enums).
        """
        new = member_from(update)
        if new.name == self._me.name:
            return [], self._refute(new)
        newest = self._slots.get(new.slot)
        if newest is not None and newest.instance > new.instance:
            # News of a process its slot has replaced: it is gone, whatever the news says.
            return self._bury(new.name, new), None
        changes: list[Change] = []
        if newest is not None and newest.instance < new.instance:
            if newest.name == self._me.name:
                # Another process runs in our slot, started after us: the operator's mistake
                # (two daemons under one name). Nothing sensible to do but let both be, and
                # say so (the owner logs it: this table does no I/O).
                self.on_usurped(new.name, new.slot)
            else:
                changes += self._bury(newest.name)  # a restart nobody saw die: a crash
        old = self._members.get(new.name)
        if old is None or old.instance != new.instance:
            self._put(new)
            return [*changes, Change(None, new)], None
        if not self._overrides(old, new):
            return changes, None
        # Suspicion and death notices need not repeat the plugin list.
        merged = replace(new, plugins=new.plugins or old.plugins)
        self._put(merged)
        return [*changes, Change(old, merged)], None

    def _bury(self, name: str, news: Member | None = None) -> list[Change]:
        """A replaced instance is dead: the change, if we knew it alive. One we did not know
        (``news`` of it came after its replacement) is kept as a tombstone: runs it mastered
        are then known to have lost their master (a master never heard of is not taken for
        dead: core/election.py)."""
        old = self._members.get(name)
        if old is None and news is not None:
            dead = replace(news, state=State.DEAD)
            self._put(dead)
            return [Change(None, dead)]
        if old is None or old.state.gone:
            return []
        dead = replace(old, state=State.DEAD)
        self._put(dead)
        return [Change(old, dead)]

    @staticmethod
    def _overrides(old: Member, new: Member) -> bool:
        """SWIM precedence. A dead member comes back only with a higher incarnation (it
        refuted its death), never at the same one."""
        if new.incarnation != old.incarnation:
            return new.incarnation > old.incarnation
        if new.state > old.state:
            return True
        # Same incarnation and state: only a change of the draining or reclaimed flag is news.
        return new.state == old.state and (
            new.draining != old.draining or new.reclaimed != old.reclaimed
        )

    def _refute(self, news: Member) -> MemberUpdate | None:
        me = self._me
        if news.instance != me.instance:
            return None  # not us: another process under our very name (cannot be told apart)
        if news.state == State.ALIVE and news.incarnation <= me.incarnation:
            return None
        if news.state == State.LEFT and me.state == State.LEFT:
            return None
        # Suspected, declared dead, or an incarnation from the future: outbid it.
        me = replace(me, incarnation=max(me.incarnation, news.incarnation) + 1)
        self.set_me(me)
        return me.update()

    def add_known(self, members: Sequence[Member]) -> None:
        """Start from a known member list (the simulator's "already converged" bootstrap)."""
        for member in members:
            if member.name != self._me.name and member.name not in self._members:
                self._put(member)

    def set_state_of_me(
        self, state: State, draining: bool | None = None, reclaimed: bool | None = None
    ) -> MemberUpdate:
        """Change our own state (leave, drain, reclaim), bumping the incarnation so it wins."""
        me = replace(
            self._me,
            state=state,
            incarnation=self._me.incarnation + 1,
            draining=self._me.draining if draining is None else draining,
            reclaimed=self._me.reclaimed if reclaimed is None else reclaimed,
        )
        self.set_me(me)
        return me.update()

    def set_plugins_of_me(self, plugins: dict[str, str]) -> MemberUpdate:
        """Our plugins changed (``satind plugins reload``): a new incarnation carries them."""
        me = replace(self._me, plugins=dict(plugins), incarnation=self._me.incarnation + 1)
        self.set_me(me)
        return me.update()

    def measured_bandwidth(self, member: str, size: int, seconds: float) -> None:
        """A large frame from ``member``: ``size`` bytes in ``seconds``. The moving averages
        are of the bytes and of the seconds, the bandwidth their ratio (an average of rates
        would let one sample of a frame read from a full buffer, at memory speed, weigh
        more than many real ones); a sample under ``MIN_SAMPLE_S`` came from a buffer, not
        the wire, and is dropped."""
        if seconds < MIN_SAMPLE_S or member == self._me.name:
            return
        sent, took = float(size), seconds
        last = self._bandwidth_sums.get(member)
        if last is not None:
            sent = last[0] + MEASURE_WEIGHT * (sent - last[0])
            took = last[1] + MEASURE_WEIGHT * (took - last[1])
        self._bandwidth_sums[member] = (sent, took)
        self.bandwidth[member] = sent / took

    def forget_gone(self, names: Sequence[str]) -> None:
        """Drop tombstones (after they have been gone long enough to stop mattering)."""
        for name in names:
            member = self._members.get(name)
            if member is not None and member.state.gone and name != self._me.name:
                del self._members[name]  # gone members do not count as alive
                self.rtt_s.pop(name, None)
                self.bandwidth.pop(name, None)
                self._bandwidth_sums.pop(name, None)
                self._alive = None
                self._updates = None
                self.version += 1
