"""Request/reply correlation over a message transport.

Requests carry an integer ``req``; the reply carries the same one. ``wait`` gives the reply;
callers bound it with a cancel scope (``reply_within``) and get None on timeout. A reply that
comes after its waiter gave up is handed back to the caller of ``resolve`` (returns False),
because some late replies still matter: a steal reply
carrying a job must not be dropped, or that job would be lost.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import trio

from satind.net.messages import Message


@dataclass
class _Slot:
    event: trio.Event = field(default_factory=trio.Event)
    reply: Message | None = None


class Requests:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._slots: dict[int, _Slot] = {}

    def new(self) -> int:
        req = next(self._ids)
        self._slots[req] = _Slot()
        return req

    def resolve(self, req: int, reply: Message) -> bool:
        """Deliver a reply; False when nobody waits for it (unknown or timed out)."""
        slot = self._slots.pop(req, None)
        if slot is None:
            return False
        slot.reply = reply
        slot.event.set()
        return True

    async def wait(self, req: int) -> Message | None:
        """The reply to ``req``; cancelling the wait forgets the request."""
        slot = self._slots.get(req)
        if slot is None:
            return None
        try:
            await slot.event.wait()
        finally:
            self._slots.pop(req, None)
        return slot.reply

    async def reply_within(self, req: int, seconds: float) -> Message | None:
        """The reply to ``req``, or None when none came within ``seconds``.

        The reply is read from the slot, not from the wait: when the timeout and the reply
        land in the same scheduling batch, ``resolve`` has already told the replier that
        someone waits (so it took no late-reply path) while the wait itself was cancelled.
        Dropping that reply would lose the job a steal reply carries.
        """
        slot = self._slots.get(req)
        if slot is None:
            return None
        with trio.move_on_after(seconds):
            await slot.event.wait()
        self._slots.pop(req, None)
        return slot.reply

    def __len__(self) -> int:
        return len(self._slots)
