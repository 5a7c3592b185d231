"""The member table: who is in the system, where, and in which cluster.

This issue's membership is static — the launcher hands every peer the full list — behind the
small interface the peer uses (``alive``, ``get``), which the gossip-based membership of the
daemon replaces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from satind.net.transport import Address


@dataclass(frozen=True)
class Member:
    name: str
    address: Address
    cluster: str


class MembershipView(Protocol):
    """What the rest of a peer asks of membership."""

    @property
    def me(self) -> Member: ...

    def alive(self) -> Sequence[Member]:
        """Every member believed alive, this peer included, in a stable order."""
        ...

    def get(self, name: str) -> Member | None: ...


class StaticMembership:
    """A fixed member list (the embedded launcher's)."""

    def __init__(self, me: Member, members: Sequence[Member] = ()) -> None:
        self._me = me
        self._members: dict[str, Member] = {}
        self.set_members(members)

    def set_members(self, members: Sequence[Member]) -> None:
        """Replace the list (the launcher sends it once every peer has bound its port)."""
        by_name = {member.name: member for member in members}
        by_name[self._me.name] = self._me
        self._members = dict(sorted(by_name.items()))

    @property
    def me(self) -> Member:
        return self._me

    def set_me(self, me: Member) -> None:
        """Fix our own address once the listener is bound (port 0 resolved)."""
        self._me = me
        self._members[me.name] = me

    def alive(self) -> Sequence[Member]:
        return list(self._members.values())

    def get(self, name: str) -> Member | None:
        return self._members.get(name)
