"""The events the network side posts to the compute side's mailbox (the only way it reaches
the compute thread besides the work queue): a job stolen for it, a child's result another
peer computed, an orphaned subtree to cut, a stolen job its victim aborted, shared objects'
updates and replicas, a run that ended, stop. Plain frozen data: the core returns them in
``ToCompute`` effects; the worker handles them at its safe points (engine/worker_base.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from satind.net.messages import ReplicaReply as ReplicaReply
from satind.net.records import ReplicaDigest, SharedUpdate
from satind.work.jobs import Job


@dataclass(frozen=True, slots=True)
class EntityInput:
    """What an SPMD entity job reads on its holder, handed over with the job by the core
    (core/spmd/ghosts.py): the entity's registered state as of its iteration, its neighbours'
    ghosts for it, whether it has stepped here before, whether this step checkpoints, and the
    iteration it steps (a pushed job covers several: core/spmd/ghosts.py)."""

    state: Any
    ghosts: dict[int, bytes]
    stepped: bool
    checkpoint: bool
    iteration: int = 0


@dataclass(frozen=True, slots=True)
class JobArrived:
    """A job for this worker: work stolen from a peer (its arguments still encoded), or a job
    taken back from a thief. ``entity``: what an SPMD entity job reads (satind/spmd.py).
    ``restarted``: taken back from a thief that is gone: the leaves below it count as work
    done again (``RunState.redo``, kept by the compute thread)."""

    job: Job
    entity: EntityInput | None = None
    restarted: bool = False


@dataclass(frozen=True, slots=True)
class ChildResult:
    """The result of a child that another peer ran after stealing it from us (its value still
    encoded, ``codec.Encoded``), or its exception. ``needs``: the thief's replicas when it
    finished (``JobResult.needs``): the result waits until ours have seen as much.
    ``sender``: the peer it came from, asked for the calls we lack while it waits."""

    job: Job
    value: Any
    exc: BaseException | None
    needs: list[ReplicaDigest] | None = None
    sender: str = ""


@dataclass(frozen=True, slots=True)
class ResultDue:
    """Apply the held result of ``job`` now, whatever our replicas have seen: the peer that
    sent it is gone, so nobody can send the calls it waits for (core/sharing.py)."""

    job: Job


@dataclass(frozen=True, slots=True)
class Orphaned:
    """``job``, stolen from a peer that is gone, is the root of an orphan subtree: abort its
    unfinished frames and keep what is finished (satin-fault-tolerance §3.2)."""

    job: Job


@dataclass(frozen=True, slots=True)
class Cancel:
    """``job``, stolen from a peer, was aborted there (an ``Abort`` came): drop it if it is
    queued, or unwind its frames keeping nothing (engine/speculation.py)."""

    job: Job


@dataclass(frozen=True, slots=True)
class UpdatesArrived:
    """Other peers' global calls on shared objects: apply them, in order per sender."""

    updates: list[SharedUpdate]


@dataclass(frozen=True, slots=True)
class ReplicaArrived:
    """A replica fetched from another peer: install it unless ours is as recent."""

    shared_id: str
    cls: str
    state: bytes
    seen: dict[str, int]
    incarnation: int = 0


@dataclass(frozen=True, slots=True)
class ReplicaWanted:
    """A thief asks for our replica: encode it at this safe point (``shared_send``)."""

    shared_id: str
    thief: str


@dataclass(frozen=True, slots=True)
class DigestWanted:
    """Time for anti-entropy with ``peer``: send it our digest (engine/replication.py)."""

    peer: str


@dataclass(frozen=True, slots=True)
class DigestArrived:
    """``peer``'s digest: send it what it lacks (and ours back if it is ahead, unless this
    is itself a reply)."""

    peer: str
    digests: list[ReplicaDigest]
    reply: bool


@dataclass(frozen=True, slots=True)
class ForgetRun:
    """A run is over here: drop its replicas. The compute thread owns them (it iterates
    them for digests), so the network side asks instead of popping them itself."""

    run_id: str


@dataclass(frozen=True, slots=True)
class Stop:
    """Unwind the compute side."""


@dataclass(frozen=True, slots=True)
class Wakeup:
    """Only wakes the compute side (so that it notices an aborted run, or a root queued)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Report the finished children of every open frame that were not reported yet: what a
    "tic" checkpoint saves. Finished results only, not KAAPI's pending tasks with their inputs
    (kaapi §3.3): those are spawned again by re-running their ancestors (docs/operations.md)."""


MailboxEvent = (
    JobArrived
    | ChildResult
    | ResultDue
    | Orphaned
    | Cancel
    | UpdatesArrived
    | ReplicaArrived
    | ReplicaWanted
    | DigestWanted
    | DigestArrived
    | ForgetRun
    | Stop
    | Wakeup
    | Snapshot
)
