"""A core timer fired (``core/effects.Timer``): its event goes to the rule that set it.

The node sleeps a timer's delay and calls ``fire``; the simulator does the same in virtual
time; a test calls it directly with the event a handler returned. The rules themselves are
with their mechanism (shared objects, the iterative scheduler, SPMD moves and ghosts): this
table only routes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from satind.core import election, iterative, sharing, spmd
from satind.core.effects import Effects
from satind.core.model.timers import (
    AskCalls,
    DigestRound,
    ElectAgain,
    FetchReplicas,
    FlushShared,
    GhostsAgain,
    MoveTimeout,
    SchedulerTick,
    TimerEvent,
)

if TYPE_CHECKING:
    from satind.core.state import PeerState


def fire(state: PeerState, event: TimerEvent, now: float) -> Effects:
    """The effects of a timer that fired at ``now``."""
    if isinstance(event, FlushShared):
        return sharing.flush(state)
    if isinstance(event, DigestRound):
        return sharing.digest_round(state)
    if isinstance(event, FetchReplicas):
        return sharing.fetch_replicas(state, event.job, event.wait)
    if isinstance(event, AskCalls):
        return sharing.ask_calls(state, event.job, event.sender, event.wait)
    if isinstance(event, SchedulerTick):
        return iterative.tick(state, now)
    if isinstance(event, MoveTimeout):
        return spmd.move_timeout(state, event, now)
    if isinstance(event, GhostsAgain):
        return spmd.ghosts_again(state, (event.run_id, event.entity), event.job, event.iteration)
    if isinstance(event, ElectAgain):
        return election.elect_late(state, now)
    raise TypeError(f"no rule for timer event {event!r}")
