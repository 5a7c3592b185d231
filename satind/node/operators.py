"""What operators ask of a machine's peers beside runs: drain them (``satind drain``), stop them
(``satind stop``, drained or at once), lend them back to their owner and take them again
(``satind reclaim``). Any peer takes the request and passes it on to the peers it names; the
decisions of a drain are core/drain.py's (node/draining.py waits and applies them)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import trio

from satind.core.effects import Link
from satind.net import messages as m
from satind.node.host import Host

log = logging.getLogger("satind.node.control")  # as when these lived in node/control.py


def alive_named(peer: Host, names: Sequence[str]) -> tuple[list[str], list[str]]:
    """The live members an operator names (``b/0``: the process in that slot now, or
    ``b/0#k2j9x1``: that very process, or ``b``: every peer of machine b), and the names
    that match no live member."""
    found: list[str] = []
    unknown: list[str] = []
    for name in names:
        member = peer.table.named(name)
        machine = (
            []
            if "/" in name
            else [mem.name for mem in peer.table.alive() if mem.name.startswith(f"{name}/")]
        )
        if member is not None and member.alive:
            found.append(member.name)
        elif machine:
            found.extend(mem for mem in machine if mem not in found)
        else:
            unknown.append(name)
    return found, unknown


def on_drain_request(peer: Host, link: Link, msg: m.DrainRequest) -> None:
    targets, unknown = alive_named(peer, msg.peers)
    if msg.cluster:
        targets += [mem.name for mem in peer.table.alive() if mem.cluster == msg.cluster]
    if unknown or not targets:
        what = ", ".join(unknown) if unknown else f"cluster {msg.cluster!r}"
        link.post(m.ControlReply(msg.req, False, f"no live peer {what}; see `satind status`"))
        return
    for target in targets:
        if target == peer.name:
            peer.drain(f"asked by {link.remote_name}", targets, msg.deadline_s)
        else:
            reason = f"asked by {link.remote_name} via {peer.name}"
            peer.post(target, m.Drain(reason, targets, msg.deadline_s))
    link.post(m.ControlReply(msg.req, True, f"draining {len(targets)} peer(s)", targets))


def on_stop_request(peer: Host, link: Link, msg: m.StopRequest) -> None:
    targets = [mem.name for mem in peer.table.alive()] if msg.every else peer.machine()
    reason = f"stop requested by {link.remote_name}"
    if msg.drain:
        # Graceful: each peer drains (finishes, hands its results over) and then leaves; the
        # daemon exits once all its peers are down.
        for target in targets:
            if target == peer.name:
                peer.drain(reason, targets, msg.deadline_s)
            else:
                peer.post(target, m.Drain(f"{reason} via {peer.name}", targets, msg.deadline_s))
        link.post(m.ControlReply(msg.req, True, f"draining {len(targets)} peer(s)", targets))
        return
    for target in targets:
        if target != peer.name:
            peer.post(target, m.Shutdown(reason))
    link.post(m.ControlReply(msg.req, True, f"stopping {len(targets)} peer(s)", targets))
    if peer.name in targets:

        async def stop_soon() -> None:
            await trio.sleep(peer.cfg.membership.leave_linger_s)  # the replies go out first
            log.info("%s", reason)
            peer.leave()

        peer.spawn_task(stop_soon)


def on_reclaim_request(peer: Host, link: Link, msg: m.ReclaimRequest) -> None:
    targets, unknown = alive_named(peer, msg.peers)
    if unknown or not targets:
        what = ", ".join(unknown) if unknown else "(none named)"
        link.post(m.ControlReply(msg.req, False, f"no live peer {what}; see `satind status`"))
        return
    reason = f"asked by {link.remote_name}"
    for target in targets:
        if target == peer.name:
            peer.reclaim(msg.reclaim, reason)
        else:
            peer.post(target, m.Reclaim(msg.reclaim, f"{reason} via {peer.name}"))
    what = "reclaiming" if msg.reclaim else "releasing"
    link.post(m.ControlReply(msg.req, True, f"{what} {len(targets)} peer(s)", targets))


def on_reclaim(peer: Host, link: Link, msg: m.Reclaim) -> None:
    peer.reclaim(msg.reclaim, msg.reason)


def on_shutdown(peer: Host, link: Link, msg: m.Shutdown) -> None:
    log.info("shutdown requested by %s: %s", link.remote_name, msg.reason)
    peer.leave()


def on_drain(peer: Host, link: Link, msg: m.Drain) -> None:
    peer.drain(msg.reason, msg.leaving, msg.deadline_s)
