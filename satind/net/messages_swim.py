"""The messages of membership (SWIM with Lifeguard, membership/swim.py): direct and
indirect probes, which carry gossip, and the full state exchange that repairs what gossip
missed.

Type codes are part of the protocol (messages.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from satind.net.messages_base import Message
from satind.net.records import Broadcasts, MemberUpdate, RunAnnounce


@dataclass(frozen=True)
class Ping(Message):
    TYPE: ClassVar[int] = 50
    seq: int
    target: str
    gossip: Broadcasts


@dataclass(frozen=True)
class Ack(Message):
    TYPE: ClassVar[int] = 51
    seq: int
    gossip: Broadcasts


@dataclass(frozen=True)
class PingReq(Message):
    """Ask a member to probe ``target`` for us (SWIM's indirect probe)."""

    TYPE: ClassVar[int] = 52
    seq: int
    target: str


@dataclass(frozen=True)
class Nack(Message):
    """Lifeguard: the indirect probe found no answer (so the asker's own links are fine)."""

    TYPE: ClassVar[int] = 53
    seq: int


@dataclass(frozen=True)
class PushPull(Message):
    """Full state exchange: on join, and now and then, to repair what gossip missed."""

    TYPE: ClassVar[int] = 54
    join: bool
    reply: bool
    members: list[MemberUpdate]
    runs: list[RunAnnounce]


@dataclass(frozen=True)
class Gossip(Message):
    TYPE: ClassVar[int] = 55
    gossip: Broadcasts
