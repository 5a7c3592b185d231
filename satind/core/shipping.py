"""Shipped code arriving at a member (plugin/shipped.py): the rule for ``CodeArrived``.

A member that learns of a run whose shipped code it lacks knows the run but does not run it
(core/lifecycle.py asks for the code: ``FetchCode``); its thief asks victims for no job of
the run meanwhile (``StealRequest.skip``), and a job it stole before it knew the run waits
here (``PeerState.held``). When the node has fetched, checked, vetted and loaded the version,
it reports ``CodeArrived``: the runs of that version get their plugin and the held jobs are
taken. When the code could not be had, the runs are refused here, saying why, and the held
jobs go back to their victims as failures — as for a member without an installed plugin.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import satind.descriptor as plugins
from satind.core import thief
from satind.core.effects import ERROR, INFO, Effects, Send, StealUpdate
from satind.net import messages as m

if TYPE_CHECKING:
    from satind.core.state import PeerState


@dataclass(frozen=True, slots=True)
class CodeArrived:
    """The node fetched a shipped version (``plugins`` by name), or could not (``error``);
    ``evicted``: versions it dropped from its cache meanwhile (no run uses them)."""

    code_hash: str
    plugins: Mapping[str, plugins.Plugin] = field(default_factory=dict)
    error: str = ""
    evicted: tuple[str, ...] = ()
    # Its plugins whose requirements this peer lacks, and which (plugin/requirements.py).
    unmet: Mapping[str, str] = field(default_factory=dict)
    # The version's bytes (its files together).
    size: int = 0


def on_code(state: PeerState, event: CodeArrived, now: float) -> Effects:
    code_hash = event.code_hash
    for old in event.evicted:
        state.shipped.pop(old, None)
        state.code_bytes.pop(old, None)
    state.fetching.discard(code_hash)
    if event.plugins:
        state.shipped[code_hash] = dict(event.plugins)
        state.code_bytes[code_hash] = event.size
        state.unmet.update({(name, code_hash): why for name, why in event.unmet.items()})
    for run in state.runs.active.values():
        info = run.info
        if info.code_hash != code_hash or run.plugin is not None or run.refused is not None:
            continue
        plugin = state.plugin_version(info.plugin, code_hash)
        if plugin is None:
            run.refused = (
                f"peer {state.name} could not get the shipped code {code_hash[:12]} of run "
                f"{info.run_id}: {event.error or f'it has no plugin {info.plugin}'}"
            )
            state.note(ERROR, __name__, "refusing run %s: %s", info.run_id, run.refused)
        elif why := state.unmet_why(plugin):
            run.refused = f"peer {state.name} takes no part: plugin {info.plugin} requires {why}"
            state.note(ERROR, __name__, "refusing run %s: %s", info.run_id, run.refused)
        else:
            run.plugin = plugin
            state.note(INFO, __name__, "run %s: its shipped code is here", info.run_id)
    fx: Effects = []
    for spec, victim in state.held.pop(code_hash, []):
        # Taken now, or (the code could not be had) given back to its victim, which runs it.
        taken, more = thief.take(state, spec, victim, now)
        fx += more
        if taken and spec.pushed:
            # An iterative run's task: its master counts the program's transfer as over.
            fx.append(Send(victim, m.TaskAck(spec.run_id, spec.path, has_code=True)))
    return [*fx, StealUpdate()]
