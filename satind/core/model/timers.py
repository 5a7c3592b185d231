"""What a core timer hands back to the core when it fires (``core/effects.Timer``). A timer is
data — a delay and one of these events — not a closure, so a case-table test compares the
timers a handler set by equality, and fires one by calling ``core/timers.fire`` with it.
Each event names the rule it wakes (the dispatch is ``core/timers.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from satind.work.jobs import Job


@dataclass(frozen=True, slots=True)
class FlushShared:
    """The combining interval of this peer's global calls ended (core/sharing.py)."""


@dataclass(frozen=True, slots=True)
class DigestRound:
    """Anti-entropy's turn: a digest of our replicas to the next member (core/sharing.py)."""


@dataclass(frozen=True, slots=True)
class FetchReplicas:
    """A parked stolen job still waits for its guard after ``wait`` seconds: fetch its
    replicas from its victim (core/sharing.py)."""

    job: Job
    wait: float


@dataclass(frozen=True, slots=True)
class AskCalls:
    """A child's result still waits for the global calls its thief had applied, after
    ``wait`` seconds: ask ``sender`` for what we lack (core/sharing.py)."""

    job: Job
    sender: str
    wait: float


@dataclass(frozen=True, slots=True)
class SchedulerTick:
    """A time slot of the iterative runs' scheduler on their master (core/iterative.py)."""


@dataclass(frozen=True, slots=True)
class MoveTimeout:
    """A move of an SPMD entity that may not have ended in time (core/spmd/)."""

    run_id: str
    entity: int
    to: str


@dataclass(frozen=True, slots=True)
class GhostsAgain:
    """An SPMD step still waits for its ghosts: ask the neighbours' holders again
    (core/spmd/ghosts.py)."""

    run_id: str
    entity: int
    job: Job
    # The iteration the step waits at (a pushed job steps several: each wait has its loop).
    iteration: int


@dataclass(frozen=True, slots=True)
class ElectAgain:
    """A run whose master was replaced by a newer instance has waited ``ft.replaced_grace_s``:
    the election's second chance, now rather than at the next custody tick
    (core/election.py)."""


TimerEvent = (
    FlushShared
    | DigestRound
    | FetchReplicas
    | AskCalls
    | SchedulerTick
    | MoveTimeout
    | GhostsAgain
    | ElectAgain
)
# The same, as a tuple for ``isinstance`` (core/handle.py tells a timer from other stimuli).
TIMER_EVENTS = (
    FlushShared,
    DigestRound,
    FetchReplicas,
    AskCalls,
    SchedulerTick,
    MoveTimeout,
    GhostsAgain,
    ElectAgain,
)
