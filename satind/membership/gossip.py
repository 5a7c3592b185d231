"""Dissemination: a broadcast queue with combining and a retransmit limit (memberlist's
TransmitLimitedQueue).

Everything that must reach every peer eventually — member updates, run announcements, and
later orphan tuples — is queued here under a key. A newer item with the same key replaces the
older one (combining: only the latest news about a member is worth sending). Each message
piggybacks the items sent the fewest times so far; an item is dropped after
``retransmit_limit`` sends, which with random gossip targets reaches every member with high
probability (epidemic spread needs O(log N) rounds).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Generic, TypeVar

import trio

from satind.net.messages import Broadcasts, MemberUpdate, RunAnnounce

T = TypeVar("T")


def retransmit_limit(mult: int, members: int) -> int:
    """How many times to send one update: mult * ceil(log10(N + 1)) (memberlist)."""
    return mult * max(1, math.ceil(math.log10(members + 1)))


@dataclass
class _Entry(Generic[T]):
    item: T
    transmits: int
    order: int


class BroadcastQueue(Generic[T]):
    def __init__(self) -> None:
        self._entries: dict[object, _Entry[T]] = {}
        self._order = itertools.count()

    def add(self, key: object, item: T) -> None:
        """Queue ``item``, replacing any pending item with the same key."""
        self._entries[key] = _Entry(item, 0, next(self._order))

    def take(self, count: int, limit: int) -> list[T]:
        """Up to ``count`` items, least sent first (newest first among equals); each is
        counted as sent once more, and dropped once sent ``limit`` times."""
        if not self._entries or count <= 0:
            return []
        chosen = sorted(self._entries.items(), key=lambda kv: (kv[1].transmits, -kv[1].order))
        out = []
        for key, entry in chosen[:count]:
            out.append(entry.item)
            entry.transmits += 1
            if entry.transmits >= limit:
                del self._entries[key]
        return out

    def __len__(self) -> int:
        return len(self._entries)


class Dissemination:
    """The peer's queues of member updates and run announcements, packed into Broadcasts."""

    def __init__(self, retransmit_mult: int, max_items: int) -> None:
        self.retransmit_mult = retransmit_mult
        self.max_items = max_items
        self.members: BroadcastQueue[MemberUpdate] = BroadcastQueue()
        self.runs: BroadcastQueue[RunAnnounce] = BroadcastQueue()
        # Set when something is queued; the gossip loop sleeps on it when there is no news.
        self.wakeup = trio.Event()

    def add_member(self, update: MemberUpdate) -> None:
        self.members.add(update.name, update)
        self.wakeup.set()

    def add_run(self, announce: RunAnnounce) -> None:
        self.runs.add(announce.info.run_id, announce)
        self.wakeup.set()

    def pending(self) -> bool:
        return bool(len(self.members) or len(self.runs))

    def take(self, cluster_size: int) -> Broadcasts:
        limit = retransmit_limit(self.retransmit_mult, cluster_size)
        members = self.members.take(self.max_items, limit)
        runs = self.runs.take(max(1, self.max_items // 8), limit)
        # Orphan tuples do not ride on gossip: their holder announces them to every member
        # at once (node/announce.py).
        return Broadcasts(members, runs)
