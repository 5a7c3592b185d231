"""A core timer fired (``core/effects.Timer``): its event goes to the rule that set it.

The node sleeps a timer's delay and calls ``fire``; the simulator does the same in virtual
time; a test calls it directly with the event a handler returned. The rules themselves are
with their mechanism (shared objects, the iterative scheduler, SPMD moves and ghosts): this
table only routes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

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
from satind.routing import Routes

if TYPE_CHECKING:
    from satind.core.state import PeerState


# (state, the timer's event, now) -> effects.
Rule = Callable[["PeerState", Any, float], Effects]

RULES: Routes[Rule] = Routes(
    "timer event",
    {
        FlushShared: lambda s, e, now: sharing.flush(s),
        DigestRound: lambda s, e, now: sharing.digest_round(s),
        FetchReplicas: lambda s, e, now: sharing.fetch_replicas(s, e.job, e.wait),
        AskCalls: lambda s, e, now: sharing.ask_calls(s, e.job, e.sender, e.wait),
        SchedulerTick: lambda s, e, now: iterative.tick(s, now),
        MoveTimeout: lambda s, e, now: spmd.move_timeout(s, e, now),
        GhostsAgain: lambda s, e, now: spmd.ghosts_again(
            s, (e.run_id, e.entity), e.job, e.iteration
        ),
        ElectAgain: lambda s, e, now: election.elect_late(s, now),
    },
)


def fire(state: PeerState, event: TimerEvent, now: float) -> Effects:
    """The effects of a timer that fired at ``now``."""
    return RULES[event](state, event, now)
