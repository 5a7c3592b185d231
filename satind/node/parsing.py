"""A submission's parse, bounded: in time, and in how many run at once per client.

A run's arguments are a client's data, and its parse is plugin code: it may be slow, loop,
or wait on something that never comes. It runs in a thread of its own (``run_plugin``),
waits for one of its client certificate's ``run.parses_per_client`` slots, and is given
``run.parse_timeout_s`` in all; past that the submission is refused, saying so, and the
thread is let go. A Python thread cannot be stopped, so a stuck parse keeps its slot until
it returns: the client that sent it waits for its own slots (or is refused, in time), and
every other client, the peer's network side and a stop go on as if nothing happened.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

import trio

import satind.files as files
import satind.plugin as plugins
from satind.descriptor import Parsed
from satind.net import codec, tls
from satind.net import messages as m
from satind.node.host import Host
from satind.plugin import hooks

if TYPE_CHECKING:
    from satind.core.effects import Link

log = logging.getLogger(__name__)


class ClientSlots:
    """Each client certificate's parse slots on this peer (a limiter each, made on first use
    and dropped when idle, so the table holds only clients with parses going)."""

    def __init__(self, per_client: int) -> None:
        self.per_client = per_client
        self._limiters: dict[str, trio.CapacityLimiter] = {}

    def of(self, who: str) -> trio.CapacityLimiter:
        limiter = self._limiters.get(who)
        if limiter is None:
            limiter = self._limiters[who] = trio.CapacityLimiter(self.per_client)
        return limiter

    def tidy(self, who: str) -> None:
        limiter = self._limiters.get(who)
        if limiter is not None:
            stats = limiter.statistics()
            if not stats.borrowed_tokens and not stats.tasks_waiting:
                del self._limiters[who]


class ParsingHost(Host, Protocol):
    """A peer that parses clients' arguments (with a bound per client)."""

    parses: ClientSlots


def client_of(link: Link) -> str:
    """Whose slots a request takes: the client certificate's name (every connection of a
    client, ``NAME~x``, counts as the same client)."""
    return link.remote_name.split(tls.CLIENT_SEPARATOR, 1)[0]


async def parse(
    peer: ParsingHost, link: Link, msg: m.Submit, plugin: plugins.Plugin
) -> Parsed | Exception | files.InputNeeded:
    """The submission's parsed arguments, or why there are none (an exception to answer
    with). Never raises for the plugin's sake."""
    who = client_of(link)
    slots = peer.parses
    started: list[bool] = []  # set by the thread once it has a slot

    def parse_here() -> Parsed:
        started.append(True)
        if msg.entry:
            return hooks.parse_function_submission(
                plugin, msg.entry, msg.values, peer.cfg.net.max_depth
            )
        return hooks.parse_submission(
            plugin, msg.argv, peer.cfg.net.max_frame_bytes, msg.inputs, peer.cfg.files
        )

    limit = peer.cfg.run.parse_timeout_s
    try:
        with trio.move_on_after(limit):
            return await peer.compute.run_plugin(parse_here, limiter=slots.of(who))
    except (files.InputNeeded, plugins.UsageError, plugins.PluginFailed, codec.EncodeError) as exc:
        return exc
    finally:
        slots.tidy(who)
    log.warning(
        "submission of %s by %s: parse %s within run.parse_timeout_s (%g s)",
        msg.plugin,
        link.remote_name,
        "did not finish" if started else "got no slot (run.parses_per_client)",
        limit,
    )
    if started:
        why = (
            f"the plugin's parse of these arguments did not finish within {limit:g} s "
            f"(run.parse_timeout_s); it runs on, holding one of client {who}'s "
            f"{slots.per_client} parse slots (run.parses_per_client) until it returns"
        )
    else:
        why = (
            f"client {who} has {slots.per_client} submissions being parsed on peer "
            f"{peer.name} (run.parses_per_client), and none finished within {limit:g} s "
            "(run.parse_timeout_s); submit when they are done, or to another peer"
        )
    return TooLong(why)


class TooLong(Exception):
    """A submission's parse did not finish in time, or did not get a slot in time."""
