"""What each peer of a testbed sees: its view of the members, asked of every peer at once from
the host through the client API (a `satind status` process per peer would cost half a
CPU-second of imports each, beside daemons that need the CPU)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from satind.client import client as remote
from satind.client.target import target


@dataclass(frozen=True)
class View:
    """One peer's answer: its own member name (``m1/0#k2j9x1``: the process now in the slot)
    and the state of every member it knows, by member name (old instances of a slot too)."""

    me: str
    members: dict[str, str]

    def state_of(self, name: str) -> str:
        return self.members.get(name, "unknown")


def gather(peers: Sequence[tuple[str, str]], keys: Path, timeout: float) -> dict[str, View]:
    """``slot`` -> its view, for each of ``peers`` (slot, address) that answers within
    ``timeout``."""
    found: dict[str, View] = {}

    async def one(slot: str, address: str) -> None:
        where = target(address, keys)
        credentials = where.credentials if where.cfg.net.tls else None
        with trio.move_on_after(timeout):
            try:
                async with remote.connect(where.address, where.cfg, credentials) as peer:
                    reply = await peer.status(within_s=timeout, deep=False)
            except (remote.PeerUnavailable, OSError):
                return
            if reply.peers:
                found[slot] = View(reply.peers[0].name, {p.name: p.state for p in reply.peers})

    async def every() -> None:
        async with trio.open_nursery() as nursery:
            for slot, address in peers:
                nursery.start_soon(one, slot, address)

    trio.run(every)
    return found


def one_system(views: dict[str, View], slots: list[str]) -> bool:
    """Whether every peer in ``slots`` answered and sees the process now in each of them
    alive."""
    if any(slot not in views for slot in slots):
        return False
    current = [views[slot].me for slot in slots]
    return all(views[slot].state_of(name) == "alive" for slot in slots for name in current)


def split(views: dict[str, View]) -> str:
    """Who sees whom alive, one line per peer (for a failure's message)."""
    current = {slot: v.me for slot, v in views.items()}
    lines = []
    for slot, view in sorted(views.items()):
        seen = [s for s, name in sorted(current.items()) if view.state_of(name) == "alive"]
        lines.append(f"{slot} ({view.me}) sees alive: {' '.join(seen)}")
    return "\n".join(lines)
