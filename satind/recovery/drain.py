"""Graceful drain: a peer leaves without losing anything (satin-fault-tolerance §3.3).

A draining peer stops stealing and taking runs, tells everyone it is draining (others may
still steal from it), and finishes what it holds: every frame, including ones that wait in a
sync for children other peers compute, so that its results reach their owners; and every job
it took and passed on to a thief, whose result comes back through it. A draining master stays
until the runs it masters are over. Then it sends each run's master its share of the run's
counters (it will not be there to be asked when the run ends), hands the results it keeps to a
peer that stays — which announces them under its own name — and leaves; everyone then treats
it as gone. Migration is: add the new peers, then drain the old ones.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from satind import stats
from satind.core.effects import Effects, Send, StealUpdate
from satind.net import messages as m
from satind.recovery.orphans import hand_over

if TYPE_CHECKING:
    from satind.core.state import PeerState

log = logging.getLogger(__name__)


def start(state: PeerState, reason: str) -> Effects:
    """Stop taking work; the node announces it and waits for ``drained``."""
    if state.draining:
        return []
    log.info("draining: %s", reason)
    state.draining = True
    return [StealUpdate()]


def drained(state: PeerState) -> bool:
    """Nothing here any more that another peer waits for. "Idle" (wanting work) is not
    enough: a frame may wait in a sync for children that thieves still compute."""
    return (
        state.worker_idle
        and state.worker_frames == 0
        and not state.custody.given
        and not state.queue.jobs
        and not state.runs.mastered_by(state.name)
        and not state.runs.queue
    )


def leave(state: PeerState) -> Effects:
    """Drained: each master gets this peer's share of its runs' counters; a peer that stays
    gets the results this peer keeps."""
    log.info("drained; leaving")
    fx: Effects = []
    for run in state.runs.active.values():
        if run.info.master != state.name:
            share = stats.as_ints(state.run_counters(run.info.run_id))
            fx.append(Send(run.info.master, m.RunShare(run.info.run_id, share)))
    return fx + hand_over(state)
