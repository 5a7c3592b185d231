"""What is decided of a submission before it runs (core/master.py accepts it then): whether
this system can run its plugin — the version every member has, the requirements this master
meets, a shipped version loaded here — and its arguments, parsed and encoded by the plugin's
own code (in a worker thread: the node's ``node/parsing.py``), or the Python values a client
sent for one of the plugin's functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import satind.descriptor as plugins
import satind.files as files
from satind.config import DEFAULT, FilesConfig
from satind.core.runs import RunRefused, VersionMismatch
from satind.membership.view import Member
from satind.net import codec
from satind.net import messages as m

if TYPE_CHECKING:
    from satind.core.state import PeerState


@dataclass(frozen=True)
class Parsed:
    """A submission's arguments, parsed and encoded by the plugin's own code."""

    plugin: plugins.Plugin
    args: tuple[Any, ...]
    encoded: bytes
    branching: int
    # The root's function when it is not the plugin's entry (RunInfo.entry).
    entry: str = ""


def parse_submission(
    plugin: plugins.Plugin,
    argv: Sequence[str],
    max_frame: int,
    inputs: dict[str, bytes] | None = None,
    files_cfg: FilesConfig = DEFAULT.files,
) -> Parsed:
    """Run the plugin's parse and branching code and encode the root's arguments. Plugin
    code: the node runs this in a worker thread, not on its network side. Its input files
    are what the client sent (``inputs``) or what the operator's input directory holds.

    Raises:
        UsageError, PluginFailed, EncodeError; InputNeeded (the client has to send a file).
    """
    with files.scope(files.Submission(inputs or {}, files_cfg)):
        args = plugin.parse_args(argv)
    encoded = codec.encode_value(args, max_frame)
    return Parsed(plugin, args, encoded, plugin.branching(args))


def parse_function_submission(
    plugin: plugins.Plugin, qualname: str, values: bytes, max_depth: int
) -> Parsed:
    """A run of one spawnable function of the plugin's module with the client's values: no
    parse runs; decoding the values may run plugin code (a registered type's constructor),
    so this runs in a worker thread too. The branching factor is the plugin's when the
    function is its entry, else 2 (progress is then estimated as for a binary tree).

    Raises:
        UsageError: no such function, or values that are not an argument tuple.
        PluginFailed: the plugin's max_branching raised.
    """
    fn = plugin.function(qualname)
    try:
        args = codec.decode_value(values, max_depth, codec.version_of(plugin.home))
    except codec.DecodeError as exc:
        raise plugins.UsageError(f"{plugin.name}: the arguments cannot be decoded: {exc}") from None
    if not isinstance(args, (list, tuple)):
        raise plugins.UsageError(f"{plugin.name}: the arguments must be a tuple of values")
    args = tuple(args)
    own = fn is plugin.entry
    branching = plugin.branching(args) if own else 2
    return Parsed(plugin, args, values, branching, "" if own else fn.name)


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
