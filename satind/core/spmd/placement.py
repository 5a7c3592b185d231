"""Where an SPMD run's entities may go (the story: core/spmd/__init__.py): the CPU share one
more entity would get on this peer (the resource profile a steal request carries), which
members are usable and least loaded, the entities' profiles and the placement the status
shows, and forgetting a run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from satind.core.effects import INFO
from satind.core.model.spmd import (
    Placement,
)

if TYPE_CHECKING:
    from satind.core.state import PeerState


def offer(state: PeerState) -> float:
    """What one more entity would get here (a share of a CPU): the resource profile a steal
    request carries. While this peer steps entities, its speed is what their steps measured
    (CPU seconds per wall second: load, GIL and all), the same measure a holder weighs its
    own entities with — so that the two sides of Γ agree and an entity that moved does not
    move back at once. Without entities, the CPU share the profiler predicts."""
    held = [h for h in state.spmd.held.values() if h.wall_s > 0]
    if held:
        speed = min(sum(h.cpu_s for h in held) / sum(h.wall_s for h in held), 1.0)
    else:
        speed = state.spmd.cpu_share
    return -1.0 if speed < 0 else speed / (len(state.spmd.held) + 1)


def alive(state: PeerState, name: str) -> bool:
    if name == state.name:
        return True
    mem = state.table.get(name)
    return mem is not None and mem.alive


def usable(state: PeerState, name: str, run_id: str) -> bool:
    """A member that may take the run's entities: alive, not draining, not reclaimed, with
    the run's plugin (the same code)."""
    if name == state.name:
        return not state.draining and not state.reclaimed
    mem = state.table.get(name)
    run = state.runs.active.get(run_id)
    return (
        mem is not None
        and mem.alive
        and not mem.draining
        and not mem.reclaimed
        and (run is None or mem.plugins.get(run.info.plugin) == run.info.code_hash)
    )


def least_loaded(state: PeerState, run_id: str, place: Placement, exclude: str) -> str:
    """The usable member holding the fewest of this run's entities (ties: by name)."""
    names = sorted(
        n for n in {state.name, *state.others()} if n != exclude and usable(state, n, run_id)
    ) or [state.name]
    counts = {n: 0 for n in names}
    for holder in (*place.locator.values(), *place.moving.values()):
        if holder in counts:
            counts[holder] += 1
    return min(names, key=lambda n: (counts[n], n))


def profile(state: PeerState, run_id: str, iteration: int, profiles: list[list[float]]) -> None:
    """Hook from the root: an iteration ended, with each entity's profile."""
    place = state.spmd.runs.get(run_id)
    if place is not None:
        place.iteration = iteration
        place.profile = profiles
        if iteration % max(state.cfg.spmd.checkpoint_every, 1) == 0:
            # A line per checkpoint: the operator's (and benchmarks/spmd_reconfig.py's) view.
            state.note(
                INFO,
                __name__,
                "run %s: iteration %d, entities %s",
                run_id,
                iteration,
                placement(state),
            )


def placement(state: PeerState) -> dict[str, int]:
    """Entities per member over this master's runs (for the status)."""
    out: dict[str, int] = {}
    for place in state.spmd.runs.values():
        for holder in place.locator.values():
            out[holder] = out.get(holder, 0) + 1
    return out


def holds_entities(state: PeerState) -> bool:
    return bool(state.spmd.held)


def forget_run(state: PeerState, run_id: str) -> None:
    """A run is over here."""
    spmd = state.spmd
    spmd.runs.pop(run_id, None)
    for table in (spmd.held, spmd.tasks, spmd.inbox, spmd.waiting, spmd.moved, spmd.leaving):
        for key in [k for k in table if k[0] == run_id]:
            del table[key]
    for step in [s for s, (key, _, _) in spmd.stepping.items() if key[0] == run_id]:
        del spmd.stepping[step]
