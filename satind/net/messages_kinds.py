"""The messages of what goes beyond a divide-and-conquer tree: shared objects (replicas
kept in step by global calls and anti-entropy, core/sharing.py), iterative runs (tasks pushed
by the master, barriers, core/iterative.py) and SPMD runs (entities, their ghosts and their
moves between holders, core/spmd/).

Type codes are part of the protocol (messages.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from satind.net.messages_base import Message
from satind.net.records import EntityTask, GhostData, JobSpec, ReplicaDigest, SharedUpdate

# -- shared objects ------------------------------------------------------------------------


@dataclass(frozen=True)
class SharedUpdates(Message):
    """Global method calls on shared objects, combined: every call one peer made during one
    combining interval (core/sharing.py), sent to every other member. Best effort."""

    TYPE: ClassVar[int] = 93
    updates: list[SharedUpdate]


@dataclass(frozen=True)
class ReplicaRequest(Message):
    """A thief asks its victim for its replica of a shared object (it has none, or its guard
    stayed false)."""

    TYPE: ClassVar[int] = 94
    shared_id: str


@dataclass(frozen=True)
class ReplicaReply(Message):
    """A replica: its class, its state (an application value; None when the asked peer has no
    replica any more) and how many global calls of each peer it has applied."""

    TYPE: ClassVar[int] = 95
    shared_id: str
    cls: str
    state: bytes | None
    seen: dict[str, int]
    incarnation: int = 0


@dataclass(frozen=True)
class SharedDigest(Message):
    """Anti-entropy: what the sender has applied to each of its replicas. The receiver sends
    back the calls the sender lacks, or a whole replica, and its own digest (``reply``) when
    the sender is ahead of it (engine/replication.py)."""

    TYPE: ClassVar[int] = 96
    digests: list[ReplicaDigest]
    reply: bool = False


# -- iterative runs ------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskPush(Message):
    """Master to worker: run this task of an iterative run (the master's scheduler chose you,
    core/iterative.py). Its result goes back as a ``JobResult``; an ``Abort`` cancels it
    (another copy finished first)."""

    TYPE: ClassVar[int] = 97
    job: JobSpec
    # An entity job of an SPMD run (core/spmd/): it waits at the worker for its ghosts.
    entity: EntityTask | None = None


@dataclass(frozen=True)
class TaskAck(Message):
    """Worker to master: the task arrived (its transfer is over: the master may start
    another, within ``iterative.n_com``)."""

    TYPE: ClassVar[int] = 98
    run_id: str
    path: bytes
    # The run's code was there when the task came. Shipped code a worker lacks is fetched
    # first (the paper's program transfer, T_prog): that task's time is not its speed, and
    # until a task says so the master counts the program's transfer in the worker's Delay.
    has_code: bool = True


@dataclass(frozen=True)
class Barrier(Message):
    """Master to every member: an iterative run passed a barrier; ``state`` (an application
    value) is what a new master resumes it from."""

    TYPE: ClassVar[int] = 99
    run_id: str
    epoch: int
    iteration: int
    state: bytes


# -- SPMD runs -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Ghost(Message):
    """Holder to holder: an entity's data for its neighbour ``entity`` (core/spmd/); sent
    peer to peer, never through the master. A peer the entity left forwards it."""

    TYPE: ClassVar[int] = 102
    run_id: str
    entity: int
    ghost: GhostData


@dataclass(frozen=True)
class EntityMove(Message):
    """Master to holder: send ``entity`` (its registered state and the ghosts it holds) to
    ``to``, now that its step is over."""

    TYPE: ClassVar[int] = 103
    run_id: str
    entity: int
    to: str


@dataclass(frozen=True)
class EntityState(Message):
    """Old holder to new holder: an entity moves to you (its registered state as of the
    start of ``iteration`` of generation ``gen``, and the ghosts that came for it)."""

    TYPE: ClassVar[int] = 104
    run_id: str
    entity: int
    gen: int
    iteration: int
    state: bytes
    ghosts: list[GhostData]
    cpu_s: float = 0.0


@dataclass(frozen=True)
class EntityMoved(Message):
    """New holder to master: ``entity`` is installed here (the locator follows). With
    ``refused`` set, the move failed: from the old holder, the entity stays there; from the
    new one, it is lost (the run rolls back)."""

    TYPE: ClassVar[int] = 105
    run_id: str
    entity: int
    refused: str = ""
    # The generation the entity arrived in (from its ``EntityState``; -1 with a refusal).
    gen: int = -1


@dataclass(frozen=True)
class MigrateRequest(Message):
    """Holder to master: moving ``entity`` to ``to`` pays (its gain Γ, mpi-ios §5), or, with
    ``to`` empty, the holder drains and the entity must go anywhere."""

    TYPE: ClassVar[int] = 106
    run_id: str
    entity: int
    to: str
    gain: float


@dataclass(frozen=True)
class EntityLeaving(Message):
    """Holder to master: the holder moves ``entity`` to ``to`` now that its job's last step
    is over — its gain Γ paid off (mpi-ios §5: the holders' agents decide, the master
    records). The master holds the entity's next push back until ``to`` says it has it
    (``EntityMoved``)."""

    TYPE: ClassVar[int] = 118
    run_id: str
    entity: int
    to: str
    gain: float
    # The entity's generation at the holder: the master ignores a move of an older one (a
    # step that ended after a rollback had placed the entity again).
    gen: int


@dataclass(frozen=True)
class GhostRequest(Message):
    """Holder to holder: ``entity``'s step waits for the ghost ``sender`` made for it at the
    end of (``gen``, ``iteration``); send it to ``requester`` if you have it (a ghost that
    went to a peer the entity had left, and was lost with it, is made good this way)."""

    TYPE: ClassVar[int] = 107
    run_id: str
    entity: int
    sender: int
    gen: int
    iteration: int
    requester: str
