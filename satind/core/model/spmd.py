"""An SPMD run's records (the rules: core/spmd/): a master's placement of each run's entities
(the locator), a holder's entities with their ghosts and profiles, and the counters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from satind.net import messages as m
from satind.work.jobs import Job

PLACE, STEP, COLLECT = 0, 1, 2
EntityKey = tuple[str, int]  # (run id, entity)

# The spawnable functions whose jobs are entity jobs (satind/spmd.py registers its own).
# Their arguments are (plugin, args, entity, phase, iteration, gen, iterations, neighbours,
# entities, restore).
ENTITY_FNS: set[Callable[..., Any]] = set()


# Ghost tags (generation, iteration) an entity may have waiting: the current iteration's and
# the next, and a few of a generation that is starting.
MAX_GHOST_TAGS = 8


class EntityLost(Exception):
    """An entity job cannot finish: a holder of the run died. The root rolls back to the
    last checkpoint (satind/spmd.py)."""


def is_entity_job(job: Job) -> bool:
    return job.fn in ENTITY_FNS


@dataclass
class Held:
    """An entity this peer holds: its registered state as of the start of ``iteration``, and
    its profile here (the paper's application-level profiler). The compute side reads
    ``state`` and ``ready`` (the ghosts of the step it runs) and nothing else."""

    gen: int
    iteration: int
    state: Any
    ready: dict[int, bytes] = field(default_factory=dict)
    # The ghosts it sent at the end of its last two steps, by (gen, iteration) and neighbour:
    # asked again by a neighbour whose copy was lost (``GhostRequest``).
    sent: dict[tuple[int, int], dict[int, bytes]] = field(default_factory=dict)
    # Seconds of CPU and of wall time its last steps took here, ghost bytes it sends per
    # iteration, and the bytes of its encoded state (as last measured).
    cpu_s: float = 0.0
    wall_s: float = 0.0
    bytes_out: int = 0
    size: int = 0
    # Seconds between the ends of its steps here (an iteration's time), and the last end.
    period_s: float = 0.0
    stepped_at: float | None = None
    # When it was last proposed to a thief or asked to leave (one request at a time).
    proposed_at: float = float("-inf")


@dataclass
class Departed:
    """An entity that left this holder: where it went, its generation then, and the ghosts
    it had sent from here in its last two steps (``Held.sent``). A neighbour whose copy of
    one was lost asks the holder it knew (``GhostRequest``): that is often this one, and the
    new holder never had those ghosts."""

    to: str
    gen: int
    sent: dict[tuple[int, int], dict[int, bytes]]


@dataclass
class Placement:
    """The master's record of one SPMD run."""

    locator: dict[int, str] = field(default_factory=dict)
    gen: int = 0
    iterations: int = 0
    iteration: int = 0
    # Moves asked for (entity -> target; "" anywhere) and under way.
    wanted: dict[int, str] = field(default_factory=dict)
    moving: dict[int, str] = field(default_factory=dict)
    # Each entity's unfinished job, and pushes held back until the entity's move is over.
    jobs: dict[int, Job] = field(default_factory=dict)
    # The paths of those sent to other members, to their entity (a result names its path).
    by_path: dict[bytes, int] = field(default_factory=dict)
    held_back: dict[int, Job] = field(default_factory=dict)
    # A new holder's word that an entity came (``EntityMoved``) before its old holder's that
    # it left (``EntityLeaving``, on another connection): entity -> new holder.
    arrived: dict[int, str] = field(default_factory=dict)
    lost: set[int] = field(default_factory=set)
    moves: int = 0
    # Per entity, the last iteration's profile: [cpu_s, wall_s, ghost bytes].
    profile: list[list[float]] = field(default_factory=list)


@dataclass
class SpmdCounters:
    """Names are those of the run JSON ``stats`` (stats.py)."""

    entity_moves: int = 0
    ghosts_sent: int = 0
    ghost_bytes: int = 0
    migrations_proposed: int = 0
    rollbacks: int = 0

    def as_dict(self) -> dict[str, float]:
        return dict(vars(self))


@dataclass
class Spmd:
    counters: SpmdCounters = field(default_factory=SpmdCounters)
    # As a master: its SPMD runs.
    runs: dict[str, Placement] = field(default_factory=dict)
    # As a holder: its entities (an entity job gets its part in its ``JobArrived``), ghosts
    # that came for them by (gen, iteration) and sender (also for a run not known here yet),
    # step jobs waiting for their ghosts, and entities that left (where to, what they sent).
    held: dict[EntityKey, Held] = field(default_factory=dict)
    # The last entity job that came for each entity here (its neighbours' holders).
    tasks: dict[EntityKey, m.EntityTask] = field(default_factory=dict)
    inbox: dict[EntityKey, dict[tuple[int, int], dict[int, bytes]]] = field(default_factory=dict)
    waiting: dict[EntityKey, tuple[Job, m.EntityTask]] = field(default_factory=dict)
    # The steps running inside a pushed job's span (core/spmd/ghosts.py): each step's own
    # job, to its entity, the pushed job and the task of that step.
    stepping: dict[Job, tuple[EntityKey, Job, m.EntityTask]] = field(default_factory=dict)
    moved: dict[EntityKey, Departed] = field(default_factory=dict)
    # Entities this holder decided to move (gain), to where: each goes when its job's last
    # step is over (core/spmd/__init__.py ``entity_done``).
    leaving: dict[EntityKey, tuple[str, float]] = field(default_factory=dict)
    # Thieves an entity was proposed to, and when (one at a time: ``spmd.propose_wait_s``).
    proposed: dict[str, float] = field(default_factory=dict)
    # Peers an entity came from, and when (none goes back soon: ``spmd.settle_s``).
    came_from: dict[str, float] = field(default_factory=dict)
    # The CPU share a thread would get on this peer's CPUs, as the node last measured it
    # (-1: not measured).
    cpu_share: float = -1.0
