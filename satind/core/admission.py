"""What is decided of a submission before it runs (core/master.py accepts it then): whether
this system can run its plugin — the version every member has, the requirements this master
meets, a shipped version loaded here — and its arguments, parsed and encoded by the plugin's
own code (in a worker thread: the node's ``node/parsing.py`` runs ``plugin/hooks.py``), or the
Python values a client sent for one of the plugin's functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import satind.descriptor as plugins
from satind.core.runs import RunRefused, VersionMismatch
from satind.membership.view import Member
from satind.net import messages as m

if TYPE_CHECKING:
    from satind.core.state import PeerState


def plugin_mismatches(plugin: plugins.Plugin, members: Sequence[Member]) -> list[str]:
    """Why members cannot run this plugin's version: missing, or another code hash."""
    problems = []
    for member in members:
        theirs = member.plugins.get(plugin.name)
        if not member.plugins:
            continue  # no list gossiped (yet): the member itself refuses jobs it cannot run
        if theirs is not None and theirs.startswith(plugins.UNMET):
            continue  # it lacks the plugin's requirements: it takes no part (and says so)
        if theirs is None:
            problems.append(f"peer {member.name} has no plugin {plugin.name}")
        elif theirs != plugin.code_hash:
            problems.append(
                f"peer {member.name} has {plugin.name} with code hash {theirs[:12]}, "
                f"this master has {plugin.code_hash[:12]}"
            )
    if problems:
        problems.append(
            "to fix: put the same plugin directory on every peer's --plugin-path and run "
            "`satind plugins reload`, or ship the code with the run "
            "(`satind submit --ship DIR ...`, where the peers accept shipped code)"
        )
    return problems


def check_submission(state: PeerState, msg: m.Submit) -> plugins.Plugin:
    """What can be decided before any plugin code runs.

    Raises:
        UnknownPlugin, UsageError (another version at the client), RunRefused.
    """
    if state.draining:
        raise RunRefused(f"peer {state.name} is draining; submit to another peer")
    if msg.files:
        # Shipped with it, loaded here by the node first (node/shipping.py); every member
        # fetches it (core/shipping.py), so no member's installed plugins matter.
        shipped = state.plugin_version(msg.plugin, msg.code_hash)
        if shipped is None:
            has = ", ".join(sorted(state.shipped.get(msg.code_hash, {}))) or "none"
            raise plugins.UnknownPlugin(
                msg.plugin, [], f"the shipped code has no plugin {msg.plugin!r} (it has: {has})"
            )
        _refuse_if_unmet(state, shipped)
        if shipped.kind not in ("divide-and-conquer", "iterative"):
            # An SPMD entity's step waits at its holder for its neighbours' ghosts: one
            # waiting for its code there too is not built.
            raise RunRefused(
                f"plugin {msg.plugin} is an {shipped.kind} plugin: only divide-and-conquer "
                "and iterative plugins can be shipped yet; install it on every peer "
                "(--plugin-path)"
            )
        return shipped
    plugin = _plugin_or_what_the_system_has(state, msg.plugin)
    _refuse_if_unmet(state, plugin)
    if msg.code_hash and msg.code_hash != plugin.code_hash:
        raise plugins.UsageError(
            f"plugin {msg.plugin}: the client has code hash {msg.code_hash[:12]}, "
            f"peer {state.name} has {plugin.code_hash[:12]}"
        )
    problems = plugin_mismatches(plugin, state.members())
    if problems:
        raise VersionMismatch("; ".join(problems))
    return plugin


def _refuse_if_unmet(state: PeerState, plugin: plugins.Plugin) -> None:
    """A master must run its run's root: one whose environment lacks the plugin's
    requirements refuses, naming the members that can serve it.

    Raises:
        RunRefused: this peer lacks a requirement.
    """
    why = state.unmet_why(plugin)
    if not why:
        return
    able = sorted(m.name for m in state.members() if m.plugins.get(plugin.name) == plugin.code_hash)
    where = f"submit to one that has them: {', '.join(able)}" if able else "no member has them"
    raise RunRefused(f"plugin {plugin.name} requires {why} on peer {state.name}; {where}")


def _plugin_or_what_the_system_has(state: PeerState, name: str) -> plugins.Plugin:
    """Raises UnknownPlugin listing what every member has (from gossip), and which members
    have this one if this master does not."""
    try:
        return state.plugin_named(name)
    except plugins.UnknownPlugin:
        pass
    system = set(state.plugins)
    holders = []
    for member in state.members():
        system |= member.plugins.keys()
        if name in member.plugins:
            holders.append(member.name)
    message = f"unknown plugin {name!r} on peer {state.name}"
    if holders:
        message += f"; members {', '.join(sorted(holders))} have it: submit to one of them"
    message += f"; the system has: {', '.join(sorted(system)) or '(none)'}"
    raise plugins.UnknownPlugin(name, system, message)
