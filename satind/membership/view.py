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

One addition: each process has an ``instance`` (its start time in nanoseconds). A peer restarted
under the same name is a new instance; an update with a newer instance replaces the member
outright, and the old instance counts as gone (its stolen jobs must be recovered), even if
nobody saw it die.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Protocol

from satind.net.messages import MemberUpdate
from satind.net.transport import Address


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
    """What applying an update did (for the failure detector and the recovery hooks)."""

    before: Member | None
    after: Member
    # The previous instance of a restarted member is gone (its work must be recovered).
    replaced: bool = False


class MembershipView(Protocol):
    """What the rest of a peer asks of membership."""

    @property
    def me(self) -> Member: ...

    def alive(self) -> Sequence[Member]:
        """Every member believed alive or suspect, this peer included, in name order."""
        ...

    def get(self, name: str) -> Member | None: ...


class MemberTable:
    """Every member this peer knows of, dead and left ones included (as tombstones)."""

    def __init__(self, me: Member) -> None:
        self._me = me
        self._members: dict[str, Member] = {me.name: me}
        # Members alive or suspect, kept up to date so that counting costs nothing, and their
        # sorted list, rebuilt only after a change (every probe and gossip round asks for it).
        self.alive_count = 1 if me.alive else 0
        self._alive: list[Member] | None = None
        self._updates: list[MemberUpdate] | None = None
        # Bumped on every change, so that views derived from the table can be cached.
        self.version = 0

    @property
    def me(self) -> Member:
        return self._me

    def _put(self, member: Member) -> None:
        old = self._members.get(member.name)
        self.alive_count += int(member.alive) - int(old is not None and old.alive)
        self._members[member.name] = member
        self._alive = None
        self._updates = None
        self.version += 1

    def set_me(self, me: Member) -> None:
        self._me = me
        self._put(me)

    def get(self, name: str) -> Member | None:
        return self._members.get(name)

    def alive(self) -> list[Member]:
        """Members alive or suspect, by name. The list is shared: do not change it."""
        if self._alive is None:
            self._alive = [m for _, m in sorted(self._members.items()) if m.alive]
        return self._alive

    def everyone(self) -> list[Member]:
        return [m for _, m in sorted(self._members.items())]

    def updates(self) -> list[MemberUpdate]:
        """Every member as an update (what a state sync sends), built once per member change:
        with a thousand members a sync is a thousand of them."""
        if self._updates is None:
            self._updates = [m.update() for _, m in sorted(self._members.items())]
        return self._updates

    def __len__(self) -> int:
        return self.alive_count

    def apply(self, update: MemberUpdate) -> tuple[Change | None, MemberUpdate | None]:
        """Apply one update. Returns (the change, or None if it changed nothing; and a
        refutation to broadcast when the update wrongly says this peer is not alive).

        Raises:
            KeyError: an unknown state label (the codec cannot check string enums).
        """
        new = member_from(update)
        if new.name == self._me.name:
            return None, self._refute(new)
        old = self._members.get(new.name)
        if old is None:
            if new.state.gone:
                # A tombstone for someone we never knew: remember it so a stale "alive" of
                # the same incarnation cannot bring it back.
                self._put(new)
                return Change(None, new), None
            self._put(new)
            return Change(None, new), None
        if new.instance != old.instance:
            if new.instance < old.instance:
                return None, None  # news of an older process: ignore
            self._put(new)
            return Change(old, new, replaced=not old.state.gone), None
        if not self._overrides(old, new):
            return None, None
        # Suspicion and death notices need not repeat the plugin list.
        merged = replace(new, plugins=new.plugins or old.plugins)
        self._put(merged)
        return Change(old, merged), None

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
        if news.instance > me.instance:
            # Someone else runs under our name with a newer process. Nothing sensible to do but
            # let the newer one win; this one should not be running (the operator's mistake).
            return None
        if news.instance < me.instance:
            # Gossip about an earlier process of ours (we restarted): tell them we are new.
            return me.update()
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

    def forget_gone(self, names: Sequence[str]) -> None:
        """Drop tombstones (after they have been gone long enough to stop mattering)."""
        for name in names:
            member = self._members.get(name)
            if member is not None and member.state.gone and name != self._me.name:
                del self._members[name]  # gone members do not count as alive
                self._alive = None
                self._updates = None
                self.version += 1
