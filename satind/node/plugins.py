"""Plugins on a running system: what each member has (``satind plugins --to``), and loading
the plugin paths again without a restart (``satind plugins reload``, SIGHUP).

A reload rescans this peer's ``--plugin-path`` directories (plugin.rescan: each plugin module
is vetted in a process of its own first) in a worker thread, gossips the new name -> code
hash list (a master checks it before it starts a run), and makes this peer stop taking jobs
of live runs whose plugin changed or went away: a stolen job names its function, and after
the reload that name means the new code. Jobs it already holds run to the end with the code
they were made with. A plugin module that fails, exits or hangs at
import is not loaded; the answer names its file and says why, one line each.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import satind.plugin as plugin_mod
from satind.core.events import PluginsChanged
from satind.core.handle import handle
from satind.net import messages as m
from satind.node.host import Host
from satind.node.rpc import ask_all
from satind.plugin import requirements

if TYPE_CHECKING:
    from satind.net.transport import Link

log = logging.getLogger(__name__)


def listing(peer: Host, note: str = "") -> m.MemberPlugins:
    return m.MemberPlugins(
        peer.name,
        [
            m.PluginInfo(
                p.name, p.code_hash, p.source, p.usage, p.description, peer.state.unmet_why(p)
            )
            for p in sorted(peer.state.plugins.values(), key=lambda p: p.name)
        ],
        note,
    )


async def reload(peer: Host) -> str:
    """Rescan the plugin paths; what changed, in words."""
    paths = list(peer.options.plugin_paths)
    try:
        found = await peer.compute.offload(plugin_mod.rescan, paths, peer.cfg.plugins)
    except Exception as exc:  # a missing directory; plugin modules that fail are listed
        log.warning("plugin reload failed: %s", exc)
        return f"reload failed: {exc}"
    for failure in found.failures:
        log.warning("%s", failure)
    note = adopt(peer, found.plugins)
    return note + "".join(f"\n  {failure}" for failure in found.failures)


def adopt(peer: Host, found: dict[str, plugin_mod.Plugin]) -> str:
    old = peer.state.plugins
    added = sorted(found.keys() - old.keys())
    removed = sorted(old.keys() - found.keys())
    changed = sorted(n for n in found.keys() & old.keys() if found[n].code_hash != old[n].code_hash)
    peer.apply(
        handle(peer.state, PluginsChanged(found, requirements.unmet_here(found)), peer.now())
    )
    peer.swim.set_plugins(requirements.gossiped(found))
    parts = [
        f"{what} {', '.join(names)}"
        for what, names in (("added", added), ("changed", changed), ("removed", removed))
        if names
    ]
    note = "; ".join(parts) or "no change"
    log.info("plugins reloaded: %s", note)
    return note


def on_plugins_request(peer: Host, link: Link, msg: m.PluginsRequest) -> None:
    async def answer() -> None:
        note = await reload(peer) if msg.reload else ""
        members = [listing(peer, note)]
        if msg.everyone:
            answers = await ask_all(
                peer,
                lambda req: m.PluginsRequest(req, False, msg.reload),
                m.PluginsReply,
                peer.cfg.client.timeout_s,
            )
            for _, reply in answers:
                members.extend(reply.members[:1])  # each answers for itself
        link.post(m.PluginsReply(msg.req, sorted(members, key=lambda p: p.member)))

    peer.spawn_answer(link, msg.req, answer)
