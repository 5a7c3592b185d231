"""Orphan tuples announced as the paper announces them (satin-fault-tolerance-malleability-
migration §3.6): combined, one message per member. A peer that keeps orphans — after a member's
loss, while an orphan subtree unwinds, when a leaving peer hands results over — gathers the
tuples of ``ft.tuple_combine_s`` and sends them to every member it knows in one message each
(more only past ``ft.tuples_per_message``), instead of gossiping each tuple on through every
member: a handful of messages per loss, not hundreds. A member it did not know of yet gets the
table with its first steals (core/victim.py); a lost message costs recomputation only."""

from __future__ import annotations

from collections.abc import Callable

import trio

from satind.net import messages as m


class TupleAnnouncer:
    def __init__(
        self,
        combine_s: float,
        per_message: int,
        members: Callable[[], list[str]],
        post: Callable[[str, m.Message], object],
        spawn: Callable[..., None],
    ) -> None:
        self.combine_s = combine_s
        self.per_message = max(1, per_message)
        self._members = members
        self._post = post
        self._spawn = spawn
        self._pending: list[m.OrphanTuple] = []
        # Messages that carried orphan tuples (the "broadcast messages" of satin-ft Table 2).
        self.messages = 0

    def add(self, item: m.OrphanTuple) -> None:
        if not self._pending:
            self._spawn(self._flush_soon)
        self._pending.append(item)

    async def _flush_soon(self) -> None:
        await trio.sleep(self.combine_s)
        batch, self._pending = self._pending, []
        chunks = [
            batch[at : at + self.per_message] for at in range(0, len(batch), self.per_message)
        ]
        for member in self._members():
            for chunk in chunks:
                self._post(member, m.Gossip(m.Broadcasts(tuples=chunk)))
                self.messages += 1
