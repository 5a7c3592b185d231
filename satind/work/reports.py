"""What the compute side reports to the network side: one typed stream of plain frozen data,
the way back of the mailbox (``work/events.py``). The worker calls ``WorkerHooks.report`` with
one of these at the moment it happens; the node hands it to the trio thread without blocking
(``TrioToken.run_sync_soon``; the simulator after the compute side's turn), where the core
decides what it means (``core/reports.py``) and the node does the rest (the steal loop's
wanting, the checkpoint writer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from satind.net.messages import ReplicaReply, SharedDigest, SharedUpdates
from satind.net.records import SharedUpdate
from satind.work.jobs import Job


@dataclass(frozen=True, slots=True)
class WantWork:
    """The worker has nothing to run (True) or has work again (False). ``run_id``: the wait is
    a sync inside a job of that run, which takes only jobs of its own run (a job of another
    run started on top of it would hold its frame hostage until it ended); empty: any work
    will do. ``frames``: the frames open on the compute thread then (read there, so that it
    arrives in order with the results of the frames that ended before)."""

    wanted: bool
    run_id: str
    frames: int


@dataclass(frozen=True, slots=True)
class JobFinished:
    """A job with no local parent (a root or a stolen job) finished; its value, if any, is
    already encoded (``codec.Encoded``): send its result."""

    job: Job


@dataclass(frozen=True, slots=True)
class OrphanHit:
    """A job just spawned is an orphan ``holder`` keeps the result of: fetch it."""

    job: Job
    holder: str


@dataclass(frozen=True, slots=True)
class OrphanResult:
    """A finished job below an aborted orphan frame: keep its (encoded) result."""

    job: Job
    value: bytes


@dataclass(frozen=True, slots=True)
class SubtreeDropped:
    """``job``, the root of a cut subtree (``Orphaned``), is dropped: every result kept on the
    way (``OrphanResult``) was reported before."""

    job: Job


@dataclass(frozen=True, slots=True)
class ChildrenAborted:
    """``frame`` aborted its children (engine/speculation.py): the ones out on other peers (not
    finished and not queued here) must be told (an ``Abort`` each); their custody records go."""

    frame: Job


@dataclass(frozen=True, slots=True)
class SharedCallMade:
    """This peer made a global call on a shared object (satind/shared.py): ship it to every
    other member."""

    update: SharedUpdate


@dataclass(frozen=True, slots=True)
class SharedSend:
    """Send ``peer`` what the compute side made at a safe point: the replica it asked for
    (state None: not here), our digest, or the calls its digest lacks."""

    peer: str
    msg: ReplicaReply | SharedDigest | SharedUpdates


@dataclass(frozen=True, slots=True)
class ReplicaKept:
    """This peer holds a replica of ``shared_id`` now (a job here made the object), or no
    longer (``kept`` False: a fetched replica could not be installed): the core keeps the set
    of replicas this peer holds from these, and never reads the compute side's own."""

    shared_id: str
    kept: bool = True


@dataclass(frozen=True, slots=True)
class GuardWaiting:
    """A stolen job's guard is false: it waits for updates; while it still waits after
    ``shared.guard_wait_s``, its replicas are fetched from its victim. ``waiting`` False: its
    guard holds now (it is queued to run)."""

    job: Job
    waiting: bool = True


@dataclass(frozen=True, slots=True)
class ResultWaiting:
    """The result of ``job`` (a child another peer ran) came from ``sender`` before the global
    calls its thief had applied: it waits until our replicas have seen them
    (``ChildResult.needs``); the network side asks ``sender`` for what we lack, and says
    ``ResultDue`` when ``sender`` is gone. ``waiting`` False: it was applied."""

    job: Job
    sender: str
    waiting: bool = True


@dataclass(frozen=True, slots=True)
class TaskReady:
    """A driven root pushed a task (``Spawnable.push``): its run kind places it (an iterative
    run's scheduler, an SPMD entity's holder); its result comes back as a child's."""

    job: Job


@dataclass(frozen=True, slots=True)
class BarrierPassed:
    """An iterative run passed a barrier: ``state`` (encoded) is what a new master resumes
    from (core/iterative.py keeps it on every member)."""

    run_id: str
    iteration: int
    state: bytes


@dataclass(frozen=True, slots=True)
class EntityDone:
    """An SPMD entity was placed or stepped here: its registered state as of the start of
    ``iteration``, the encoded data for each neighbour, and (CPU s, wall s, state bytes)
    (core/spmd/ keeps it and sends the ghosts)."""

    run_id: str
    entity: int
    gen: int
    iteration: int
    state: Any
    ghosts: dict[int, bytes]
    measured: tuple[float, float, int]


@dataclass(frozen=True, slots=True)
class SpmdIteration:
    """An SPMD run's root passed the end of an iteration (each entity's profile)."""

    run_id: str
    iteration: int
    profiles: list[Any]


@dataclass(frozen=True, slots=True)
class JobLogged:
    """Log this finished job's (encoded) result (checkpoint policies "sel" and "tic")."""

    job: Job
    value: bytes


@dataclass(frozen=True, slots=True)
class SnapshotTaken:
    """A Snapshot was handled: every result it logged has been reported."""


Report = (
    WantWork
    | JobFinished
    | OrphanHit
    | OrphanResult
    | SubtreeDropped
    | ChildrenAborted
    | SharedCallMade
    | SharedSend
    | ReplicaKept
    | GuardWaiting
    | ResultWaiting
    | TaskReady
    | BarrierPassed
    | EntityDone
    | SpmdIteration
    | JobLogged
    | SnapshotTaken
)
