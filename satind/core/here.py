"""What the node learns about its own peer and tells the core, each as an event
(core/events.py), so that every change of the state is a rule's: it has synced with the system
(``Synced``), it is reclaimed or released, or starts as a standby (``ReclaimChanged``), its
plugins were reloaded (``PluginsChanged``), its checkpoint directory holds runs to resume
(``CheckpointsFound``), a new thread would get this share of a CPU here (``CpuShareMeasured``).
The node does what is I/O about each (gossip, the compute side, the log)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from satind.core.effects import WARNING, Effects

if TYPE_CHECKING:
    import satind.descriptor as plugins
    from satind.core.state import PeerState


def synced(state: PeerState) -> Effects:
    """Only now may this peer decide elections: before, a master it has not heard of yet would
    look gone, and a member it does not know would not be the successor it is (a restarted
    peer took a run over from a live master so)."""
    state.settled = True
    return []


def reclaim_changed(state: PeerState, reclaimed: bool, standby: bool | None) -> Effects:
    """Reclaimed by its owner (True: take no work) or released; ``standby``: whether it waits to
    be admitted (None: as it was)."""
    state.reclaimed = reclaimed
    if standby is not None:
        state.standby = standby
    return []


def plugins_changed(
    state: PeerState,
    found: dict[str, plugins.Plugin],
    unmet: Mapping[tuple[str, str], str],
) -> Effects:
    """The plugins were reloaded (``satind plugins reload``): a run whose plugin changed or went
    is refused here from now on (its master has another version), and what this peer cannot
    meet is what ``unmet`` says, besides the shipped versions it still lacks the requirements of.
    """
    old = state.plugins
    removed = old.keys() - found.keys()
    changed = {n for n in found.keys() & old.keys() if found[n].code_hash != old[n].code_hash}
    state.plugins = found
    for run in state.runs.active.values():
        name = run.info.plugin
        if run.refused is None and not run.info.shipped and (name in removed or name in changed):
            run.refused = (
                f"peer {state.name} reloaded its plugins: it has "
                + (
                    f"{name} with code hash {found[name].code_hash[:12]}"
                    if name in found
                    else "no " + name
                )
                + f", the run's master {run.info.master} has {run.info.code_hash[:12]}"
            )
            state.note(WARNING, __name__, "run %s: %s", run.info.run_id, run.refused)
    state.unmet = {key: why for key, why in state.unmet.items() if key[1] in state.shipped} | dict(
        unmet
    )
    return []


def checkpoints_found(state: PeerState, runs: Mapping[str, object]) -> Effects:
    """The unfinished runs the checkpoint directory could resume (listed by ``satind status``)."""
    state.checkpointed = dict(runs)
    return []


def cpu_share_measured(state: PeerState, share: float) -> Effects:
    """The share of a CPU one more thread would get here (IOS's resource profile)."""
    state.spmd.cpu_share = share
    return []
