"""Asking other members and waiting for their answers: written once.

A peer asks other members for their share of a run's counters (when the run ends, and for
progress), for their status line (``satind status``), for a run's result (a relay to its
master). Each ask is a request with a fresh ``req``, answered by a reply with the same one;
``ask`` waits for one answer, ``ask_all`` asks every other member at once and collects the
answers that come in time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

import trio

from satind.net import messages as m
from satind.net.requests import Requests

R = TypeVar("R", bound=m.Message)


class Asker(Protocol):
    requests: Requests

    def post(self, dest: str, msg: m.Message) -> bool: ...

    def others(self) -> list[str]: ...


async def ask(
    peer: Asker, dest: str, make: Callable[[int], m.Message], kind: type[R], within_s: float
) -> R | None:
    """Send ``make(req)`` to ``dest``; its answer of type ``kind``, or None (no answer in
    time, or the member failed to answer)."""
    req = peer.requests.new()
    peer.post(dest, make(req))
    reply = await peer.requests.reply_within(req, within_s)
    return reply if isinstance(reply, kind) else None


async def ask_all(
    peer: Asker, make: Callable[[int], m.Message], kind: type[R], within_s: float
) -> list[tuple[str, R]]:
    """Ask every other member at once; the (member, answer) pairs that came in time."""
    answers: list[tuple[str, R]] = []

    async def one(name: str) -> None:
        reply = await ask(peer, name, make, kind, within_s)
        if reply is not None:
            answers.append((name, reply))

    async with trio.open_nursery() as nursery:
        for name in peer.others():
            nursery.start_soon(one, name)
    return answers
