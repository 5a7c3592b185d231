"""Orphan tuples announced combined (node/announce.py; satin-fault-tolerance §3.6): the tuples
kept within the combining interval go to every member in one message each."""

from __future__ import annotations

from typing import Any

import trio

from satind.net import messages as m
from satind.node.announce import TupleAnnouncer


async def test_tuples_of_one_interval_go_in_one_message_per_member(
    autojump_clock: trio.testing.MockClock,
) -> None:
    sent: list[tuple[str, m.Message]] = []
    async with trio.open_nursery() as nursery:

        def spawn(fn: Any, *args: Any) -> None:
            nursery.start_soon(fn, *args)

        announcer = TupleAnnouncer(
            0.05, 3, lambda: ["b/0", "c/0"], lambda dest, msg: sent.append((dest, msg)), spawn
        )
        for i in range(5):
            announcer.add(m.OrphanTuple("r1", bytes([i]), "a/0"))
        await trio.sleep(0.1)
        # 5 tuples, at most 3 a message: 2 messages to each of the 2 members.
        assert announcer.messages == 4 and len(sent) == 4
        to_b = [msg for dest, msg in sent if dest == "b/0"]
        assert all(isinstance(msg, m.Gossip) for msg in to_b)
        got = [t.path for msg in to_b if isinstance(msg, m.Gossip) for t in msg.gossip.tuples]
        assert got == [bytes([i]) for i in range(5)]
        # A later tuple is a new announcement.
        announcer.add(m.OrphanTuple("r1", b"\x09", "a/0"))
        await trio.sleep(0.1)
        assert announcer.messages == 6
