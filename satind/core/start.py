"""Starting a run this peer masters (the rules that call it: core/master.py for a submission or
a resume, core/lifecycle.py when a slot frees, core/election.py when a run is taken over).

A run starts by being announced (gossip and a direct message to every member, with its orphan
table when it has one) and by queueing its root on the compute side; a master already running
``run.max_concurrent`` runs queues it instead, announced as queued so it is not lost with this
peer. Kept below the rules that start runs, so none of them imports another to do it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from satind.core.effects import INFO, Changed, Effects, Log, QueueRoot, Send, Spread, StealUpdate
from satind.core.model.orphans import Orphans
from satind.core.runs import FINAL, QUEUED, RUNNING, PeerRun
from satind.net import messages as m
from satind.work.jobs import make_root
from satind.work.spawnables import lookup as lookup_spawnable

if TYPE_CHECKING:
    from satind.core.state import PeerState


def queue_or_start(state: PeerState, run: PeerRun, now: float) -> Effects:
    """Start a run this peer masters now, or queue it (announced as queued, arguments and
    all, so that it is not lost with this peer) when ``run.max_concurrent`` run here."""
    mastered = len(state.runs.mastered_by(state.name))
    if mastered >= state.cfg.run.max_concurrent:
        run.status = QUEUED
        state.runs.queue.append(run)
        state.note(INFO, __name__, "run %s queued (%d running here)", run.info.run_id, mastered)
        return announce(state, m.RunAnnounce(run.info, QUEUED))
    return start(state, run, now)


def start(state: PeerState, run: PeerRun, now: float) -> Effects:
    """Start a run this peer masters: announce it and queue its root."""
    assert run.plugin is not None
    run.status = RUNNING
    run.baseline = state.peer_counters()
    run.started = now
    # Its elapsed time counts from its first start, under whichever master: a run taken over
    # carries that start, by the wall clock (machines' clocks differ by what NTP leaves).
    wall = now + state.wall_offset
    first = run.info.started_at
    if first is None:
        run.info = dataclasses.replace(run.info, started_at=wall)
    run.before = 0.0 if first is None else max(0.0, wall - first)
    state.runs.active[run.info.run_id] = run
    run.root = make_root(_root_function(run), run.args, run.state)
    if run.plugin.kind != "divide-and-conquer":
        # The root of an iterative or SPMD run is its scheduler: it runs here, never stolen
        # (its tasks are pushed; on a loaded machine a thief took the root before the
        # compute side started it, and scheduled the run from there).
        run.state.pushed = True
        # A new master resumes from the last barrier every member keeps (core/iterative.py):
        # the root reads it from its run, set before it is queued.
        last = state.iterative.barriers.get(run.info.run_id)
        run.state.resume_from = last[2] if last is not None else None
        if last is not None:
            state.note(
                INFO, __name__, "run %s: from its barrier at iteration %d", run.info.run_id, last[1]
            )
    state.note(
        INFO, __name__, "run %s: %s %s", run.info.run_id, run.info.plugin, " ".join(run.info.argv)
    )
    # Changed: a draining peer that just inherited the run hands it on (core/drain.py).
    return [
        *announce(state, m.RunAnnounce(run.info, RUNNING)),
        QueueRoot(run.root),
        StealUpdate(),
        Changed(),
    ]


def _root_function(run: PeerRun) -> Callable[..., Any]:
    """The function the run's root calls: the plugin's entry, or the function it was
    submitted as (``RunInfo.entry``, found on every peer with the plugin's code hash)."""
    assert run.plugin is not None
    if not run.info.entry:
        return run.plugin.entry.fn
    found = lookup_spawnable(run.info.entry)
    if found is not None:
        return found.fn
    name = run.info.entry

    def missing(*args: Any) -> Any:
        # Not reached with matching code (the master checks every member's code hash): the
        # run fails saying so, and this peer goes on.
        raise LookupError(f"this peer has no function {name} in plugin {run.info.plugin}")

    return missing


def start_next(state: PeerState, now: float) -> Effects:
    """A slot is free: start the next run waiting in this master's queue."""
    if state.runs.queue:
        return start(state, state.runs.queue.popleft(), now)
    return []


def announce(state: PeerState, announce: m.RunAnnounce) -> Effects:
    """Spread news of a run this peer masters: log it, gossip it, and tell every member at
    once (it is small). A run that starts with an orphan table (resumed from checkpoints, or
    respawned by a new master) sends the table along: a member that steals before gossip
    brings the tuples would compute again what is kept. Same link, so the run is known
    first."""
    fx: Effects = []
    if announce.state == RUNNING:
        fx.append(Log("run", announce))
    elif announce.state in FINAL:
        fx.append(Log("end", announce))
    fx.append(Spread(announce))
    run = state.runs.active.get(announce.info.run_id)
    table = (
        Orphans.tuples_of(run.state, announce.info.run_id)
        if run is not None and announce.state == RUNNING
        else []
    )
    chunk = state.cfg.ft.tuples_per_message
    for name in state.others():
        fx.append(Send(name, m.Gossip(m.Broadcasts([], [announce], table[:chunk]))))
        for at in range(chunk, len(table), chunk):
            fx.append(Send(name, m.Gossip(m.Broadcasts([], [], table[at : at + chunk]))))
    return fx
