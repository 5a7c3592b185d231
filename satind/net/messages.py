"""Every message of the satind protocol: one frozen dataclass each, with a type code.

Type codes are part of the protocol: append new ones, never renumber or reuse. A change that an
old peer cannot read bumps PROTOCOL_VERSION, which the handshake compares. Field types are
restricted to what codec.py validates: int, float, bool, str, bytes, None unions, list[T],
dict[str, T] and nested records (frozen dataclasses below that have no type code).

Application values (job arguments, results) travel as ``bytes`` holding their own CBOR (see
codec.encode_value): the protocol layer validates the envelope and leaves application data
opaque until the code that needs it decodes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from satind.net.records import Broadcasts as Broadcasts

# The records nested in messages (re-exported: codec.py resolves field types here).
from satind.net.records import EntityTask as EntityTask
from satind.net.records import ErrorInfo as ErrorInfo
from satind.net.records import GhostData as GhostData
from satind.net.records import JobSpec as JobSpec
from satind.net.records import MemberPlugins as MemberPlugins
from satind.net.records import MemberUpdate as MemberUpdate
from satind.net.records import OrphanTuple as OrphanTuple
from satind.net.records import PeerStatus as PeerStatus
from satind.net.records import PluginInfo as PluginInfo
from satind.net.records import ReplicaDigest as ReplicaDigest
from satind.net.records import RunAnnounce as RunAnnounce
from satind.net.records import RunInfo as RunInfo
from satind.net.records import RunStatus as RunStatus
from satind.net.records import SharedUpdate as SharedUpdate
from satind.net.records import TraceEvent as TraceEvent

PROTOCOL_VERSION = 12


@dataclass(frozen=True)
class Message:
    """Base class; subclasses set TYPE."""

    TYPE: ClassVar[int] = -1


# -- connection --------------------------------------------------------------------------


@dataclass(frozen=True)
class Hello(Message):
    """First frame in each direction. ``role`` is "peer" or "client"."""

    TYPE: ClassVar[int] = 1
    version: int
    sender: str
    cluster: str
    role: str


@dataclass(frozen=True)
class Bye(Message):
    """The sender closes this connection, saying why."""

    TYPE: ClassVar[int] = 2
    reason: str


# -- work stealing -----------------------------------------------------------------------


@dataclass(frozen=True)
class StealRequest(Message):
    """``orphans``: a joiner asks for the victim's orphan table with its steal (§3.5).
    ``run``: only a job of this run will do (the thief waits in a sync of that run); empty:
    any job."""

    TYPE: ClassVar[int] = 10
    req: int
    wide: bool
    orphans: bool = False
    run: str = ""
    # The share of a CPU one more entity of an SPMD run would get at the thief (its resource
    # profile, core/spmd.py); -1: not measured.
    cpu: float = -1.0


@dataclass(frozen=True)
class StealReply(Message):
    """The oldest job of the victim's queue, or None when it had none."""

    TYPE: ClassVar[int] = 11
    req: int
    job: JobSpec | None
    orphans: list[OrphanTuple] | None = None


@dataclass(frozen=True)
class JobResult(Message):
    """A thief returns the result of a job it stole: a value or an error."""

    TYPE: ClassVar[int] = 12
    run_id: str
    path: bytes
    value: bytes | None
    error: ErrorInfo | None
    # What the thief had applied to the run's shared objects when the job finished (its own
    # global calls and those its subtree's results waited for): the receiver applies the
    # result to its parent only once its replicas have seen as much (core/sharing.py,
    # "results wait for their calls").
    needs: list[ReplicaDigest] = field(default_factory=list)


@dataclass(frozen=True)
class JobQuery(Message):
    """A victim asks a thief about a job it gave it and has not heard of (custody.py)."""

    TYPE: ClassVar[int] = 13
    run_id: str
    path: bytes


@dataclass(frozen=True)
class JobState(Message):
    """The thief's answer: "running", "unknown" (it never got the job) or "over" (the run
    ended; ``end`` is its last announcement). A finished job is answered with its JobResult
    instead."""

    TYPE: ClassVar[int] = 14
    run_id: str
    path: bytes
    state: str
    end: RunAnnounce | None = None


# -- runs ----------------------------------------------------------------------------------
# Codes 20 (RunStart) and 21 (RunDone) are retired: runs are announced by gossip
# (RunAnnounce in Broadcasts). Never reuse them.


@dataclass(frozen=True)
class RunStatsRequest(Message):
    TYPE: ClassVar[int] = 22
    req: int
    run_id: str


@dataclass(frozen=True)
class RunStatsReply(Message):
    """One peer's counters for a run (names of the run JSON ``stats``)."""

    TYPE: ClassVar[int] = 23
    req: int
    run_id: str
    counters: dict[str, int | float]


# -- clients ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Submit(Message):
    """A client asks a peer to run a plugin; that peer becomes the run's master."""

    TYPE: ClassVar[int] = 30
    req: int
    plugin: str
    argv: list[str]
    code_hash: str = ""
    # False: the master does not run the plugin's check on the result.
    check: bool = True
    # The content of input files the arguments name, by argument (satind/files.py): the
    # client sends those the master asked for (``Submitted.needs``).
    inputs: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class Submitted(Message):
    """The run id, or why the submission was refused (``usage`` for bad arguments).
    ``contacts``: addresses ("HOST:PORT") of other members, through which a waiting client
    follows the run if this peer is lost."""

    TYPE: ClassVar[int] = 31
    req: int
    run_id: str
    error: ErrorInfo | None = None
    contacts: list[str] = field(default_factory=list)
    # Refused for want of these input files (error type "InputNeeded"): a client that has
    # them submits again with their content in ``Submit.inputs``.
    needs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RunResult(Message):
    """The outcome of a run, sent to its submitter."""

    TYPE: ClassVar[int] = 32
    run_id: str
    value: bytes | None
    error: ErrorInfo | None
    elapsed_s: float
    peers: int
    stats: dict[str, int | float] = field(default_factory=dict)
    # Made on the master by the plugin's own code (core/master.judge): the CBOR of what its
    # ``report`` made of the value (None: no report hook, show the value), and the verdict
    # of its ``check``: "ok", "skipped" (the submitter said not to), "not checked: why" (the
    # plugin has no check, or its check cannot verify this result) or "failed: ...".
    report: bytes | None = None
    check: str = "skipped"
    # Seconds after the root's end, before the result went out: the members' statistics and
    # the plugin's check (not in ``elapsed_s``, which ends when the root does).
    finish_s: float = 0.0
    # The output files the plugin's report made (satind/files.py), by the argument naming
    # each, for the submitter to write; or, when the master's operator set an output
    # directory, where the master wrote them ("PEER:PATH").
    outputs: dict[str, bytes] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ProgressRequest(Message):
    TYPE: ClassVar[int] = 33
    req: int
    run_id: str


@dataclass(frozen=True)
class ProgressReply(Message):
    """Fraction of the run's tree finished (0..1) and cluster-wide counters so far."""

    TYPE: ClassVar[int] = 34
    req: int
    run_id: str
    progress: float
    counters: dict[str, int | float]


@dataclass(frozen=True)
class Shutdown(Message):
    """Stop the receiving peer: leave gracefully and exit."""

    TYPE: ClassVar[int] = 40
    reason: str


# -- membership (SWIM) -------------------------------------------------------------------------


@dataclass(frozen=True)
class Ping(Message):
    TYPE: ClassVar[int] = 50
    seq: int
    target: str
    gossip: Broadcasts


@dataclass(frozen=True)
class Ack(Message):
    TYPE: ClassVar[int] = 51
    seq: int
    gossip: Broadcasts


@dataclass(frozen=True)
class PingReq(Message):
    """Ask a member to probe ``target`` for us (SWIM's indirect probe)."""

    TYPE: ClassVar[int] = 52
    seq: int
    target: str


@dataclass(frozen=True)
class Nack(Message):
    """Lifeguard: the indirect probe found no answer (so the asker's own links are fine)."""

    TYPE: ClassVar[int] = 53
    seq: int


@dataclass(frozen=True)
class PushPull(Message):
    """Full state exchange: on join, and now and then, to repair what gossip missed."""

    TYPE: ClassVar[int] = 54
    join: bool
    reply: bool
    members: list[MemberUpdate]
    runs: list[RunAnnounce]


@dataclass(frozen=True)
class Gossip(Message):
    TYPE: ClassVar[int] = 55
    gossip: Broadcasts


# -- control (clients of a daemon) ---------------------------------------------------------------


@dataclass(frozen=True)
class StatusRequest(Message):
    """``deep``: the answering peer asks every member (else it answers for itself only)."""

    TYPE: ClassVar[int] = 60
    req: int
    deep: bool


@dataclass(frozen=True)
class StatusReply(Message):
    TYPE: ClassVar[int] = 61
    req: int
    peers: list[PeerStatus]
    runs: list[RunStatus]


@dataclass(frozen=True)
class ResultRequest(Message):
    """A run's result; with ``wait``, the reply comes when the run ends. ``here``: only what
    the asked peer holds (a peer looking for a copy among the members), never relayed."""

    TYPE: ClassVar[int] = 62
    req: int
    run_id: str
    wait: bool
    here: bool = False


@dataclass(frozen=True)
class ResultReply(Message):
    """``result`` is None and ``error`` says why when the result is not (or no longer) here."""

    TYPE: ClassVar[int] = 63
    req: int
    result: RunResult | None
    error: str = ""


@dataclass(frozen=True)
class DrainRequest(Message):
    """Drain the named peers, or every peer of ``cluster``."""

    TYPE: ClassVar[int] = 64
    req: int
    peers: list[str]
    cluster: str = ""


@dataclass(frozen=True)
class StopRequest(Message):
    """Stop the answering peer's machine (``every``: all members); ``drain``: each peer
    finishes its work and hands its results over before it leaves."""

    TYPE: ClassVar[int] = 65
    req: int
    every: bool
    drain: bool = False


@dataclass(frozen=True)
class ControlReply(Message):
    TYPE: ClassVar[int] = 66
    req: int
    ok: bool
    message: str
    affected: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ResumeRequest(Message):
    """Resume a run from the checkpoint logs the answering peer can read: it becomes the
    run's master; the answer is ``Submitted`` (the same run id, or why not)."""

    TYPE: ClassVar[int] = 69
    req: int
    run_id: str


@dataclass(frozen=True)
class SuspendRequest(Message):
    """Suspend a run (its master checkpoints and stops it; relayed to the master by any
    peer). The answer is a ControlReply."""

    TYPE: ClassVar[int] = 70
    req: int
    run_id: str


@dataclass(frozen=True)
class CancelRequest(Message):
    """Cancel a run: its master drops it everywhere (queued, running and stolen jobs, custody,
    orphans; nothing restarted, kept or logged) and tells the submitter. Relayed to the master
    by any peer. The answer is a ControlReply."""

    TYPE: ClassVar[int] = 73
    req: int
    run_id: str


@dataclass(frozen=True)
class ResultCopy(Message):
    """A finished run's result, sent by its master to ``run.result_copies`` other members to
    keep: the result outlives its master. ``state``: done, failed or cancelled."""

    TYPE: ClassVar[int] = 74
    info: RunInfo
    state: str
    result: RunResult


@dataclass(frozen=True)
class RunLog(Message):
    """Lines that jobs of a run wrote on ``peer`` (print, logging), for the run's master."""

    TYPE: ClassVar[int] = 75
    run_id: str
    peer: str
    lines: list[str]


@dataclass(frozen=True)
class LogsRequest(Message):
    """A run's output from line number ``start`` on (relayed to the master by any peer)."""

    TYPE: ClassVar[int] = 76
    req: int
    run_id: str
    start: int


@dataclass(frozen=True)
class LogsReply(Message):
    """``next``: the number to ask from next time; ``over``: the run is no longer live."""

    TYPE: ClassVar[int] = 77
    req: int
    lines: list[str]
    next: int
    over: bool
    error: str = ""


@dataclass(frozen=True)
class PluginsRequest(Message):
    """What plugins a peer has (``everyone``: it asks every member too); ``reload``: rescan
    the plugin paths first (``satind plugins reload``)."""

    TYPE: ClassVar[int] = 90
    req: int
    everyone: bool
    reload: bool = False


@dataclass(frozen=True)
class PluginsReply(Message):
    TYPE: ClassVar[int] = 91
    req: int
    members: list[MemberPlugins]


@dataclass(frozen=True)
class TraceRequest(Message):
    """One peer's trace of a run: ``peer`` "" or the answering peer's name, its own (with
    "", also the names of the other members, to ask in turn); another name, relayed to that
    member. One peer per reply keeps every reply within the frame caps."""

    TYPE: ClassVar[int] = 78
    req: int
    run_id: str
    peer: str = ""


@dataclass(frozen=True)
class TraceReply(Message):
    """``dropped``: older events the peer's ring no longer holds (trace.max_events)."""

    TYPE: ClassVar[int] = 79
    req: int
    run_id: str
    peer: str
    events: list[TraceEvent]
    dropped: int = 0
    members: list[str] = field(default_factory=list)
    error: str = ""


@dataclass(frozen=True)
class ErrorReply(Message):
    """The answer to a request whose handler failed (a plugin's parse that raised, a bug):
    why, at once, instead of silence until the asker's timeout."""

    TYPE: ClassVar[int] = 71
    req: int
    error: ErrorInfo


@dataclass(frozen=True)
class RunShare(Message):
    """A peer that drains and leaves sends the master of each run it took part in its share
    of the run's counters (the master cannot ask it when the run ends)."""

    TYPE: ClassVar[int] = 72
    run_id: str
    counters: dict[str, int | float]


@dataclass(frozen=True)
class HandOver(Message):
    """A leaving peer's finished results, given to a peer that keeps them and announces them
    under its own name (fault tolerance §3.3); and, from a draining master, the runs it
    masters, which the receiver takes over under the next epoch once it has filed the results
    (``runs``: started, their root respawned; ``queued``: not started yet)."""

    TYPE: ClassVar[int] = 68
    results: list[JobResult]
    runs: list[RunInfo] = field(default_factory=list)
    queued: list[RunInfo] = field(default_factory=list)


@dataclass(frozen=True)
class Abort(Message):
    """Victim to thief: the job we gave you (``run_id``, ``path``) is aborted (its spawner
    called ``satind.abort()``, or an inlet of its spawner raised). Drop it and its subtree,
    send no result, and forward the abort to whoever stole from that subtree
    (satin-grid-programming-model §4.3; core/aborts.py). Best effort: a lost Abort costs the
    work of the job, never its correctness (the victim ignores the late result)."""

    TYPE: ClassVar[int] = 92
    run_id: str
    path: bytes


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


@dataclass(frozen=True)
class TaskPush(Message):
    """Master to worker: run this task of an iterative run (the master's scheduler chose you,
    core/iterative.py). Its result goes back as a ``JobResult``; an ``Abort`` cancels it
    (another copy finished first)."""

    TYPE: ClassVar[int] = 97
    job: JobSpec
    # An entity job of an SPMD run (core/spmd.py): it waits at the worker for its ghosts.
    entity: EntityTask | None = None


@dataclass(frozen=True)
class TaskAck(Message):
    """Worker to master: the task arrived (its transfer is over: the master may start
    another, within ``iterative.n_com``)."""

    TYPE: ClassVar[int] = 98
    run_id: str
    path: bytes


@dataclass(frozen=True)
class Barrier(Message):
    """Master to every member: an iterative run passed a barrier; ``state`` (an application
    value) is what a new master resumes it from."""

    TYPE: ClassVar[int] = 99
    run_id: str
    epoch: int
    iteration: int
    state: bytes


@dataclass(frozen=True)
class ReclaimRequest(Message):
    """Client to any peer: the named peers' machines are reclaimed by their owner
    (``reclaim`` True: they suspend their work and take none) or released (False)."""

    TYPE: ClassVar[int] = 100
    req: int
    peers: list[str]
    reclaim: bool


@dataclass(frozen=True)
class Reclaim(Message):
    """Peer to peer: you are reclaimed (or released), as a client asked."""

    TYPE: ClassVar[int] = 101
    reclaim: bool
    reason: str


@dataclass(frozen=True)
class LoadRequest(Message):
    """A run's master (its coordinator, node/adapt.py) asks a peer what it measured."""

    TYPE: ClassVar[int] = 108
    req: int
    run_id: str


@dataclass(frozen=True)
class LoadReply(Message):
    """A peer's counters for self-adaptivity (adaptivity/measure.py), all growing: seconds
    idle and waiting on wide-area steals, CPU seconds of the process, and the CPU seconds
    the reference benchmark took just now. ``standby``: started with ``--standby`` and not
    admitted yet. ``progress``: its share of the asking run's progress."""

    TYPE: ClassVar[int] = 109
    req: int
    cluster: str
    idle_s: float
    wide_wait_s: float
    cpu_s: float
    bench_cpu_s: float
    standby: bool
    # This peer's share of the run's progress (the ``progress`` counter: tree finished).
    progress: float


@dataclass(frozen=True)
class Ghost(Message):
    """Holder to holder: an entity's data for its neighbour ``entity`` (core/spmd.py); sent
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


@dataclass(frozen=True)
class Drain(Message):
    """Peer to peer: stop taking work, finish it, leave. ``leaving``: every peer drained by
    the same request (a machine's, a cluster's), none of which may inherit a run."""

    TYPE: ClassVar[int] = 67
    reason: str
    leaving: list[str] = field(default_factory=list)


MESSAGE_TYPES: tuple[type[Message], ...] = (
    Hello,
    Bye,
    StealRequest,
    StealReply,
    JobResult,
    JobQuery,
    JobState,
    RunStatsRequest,
    RunStatsReply,
    Submit,
    Submitted,
    RunResult,
    ProgressRequest,
    ProgressReply,
    Shutdown,
    Ping,
    Ack,
    PingReq,
    Nack,
    PushPull,
    Gossip,
    StatusRequest,
    StatusReply,
    ResultRequest,
    ResultReply,
    DrainRequest,
    StopRequest,
    ControlReply,
    Drain,
    HandOver,
    ResumeRequest,
    SuspendRequest,
    ErrorReply,
    RunShare,
    CancelRequest,
    ResultCopy,
    RunLog,
    LogsRequest,
    LogsReply,
    PluginsRequest,
    PluginsReply,
    TraceRequest,
    TraceReply,
    Abort,
    SharedUpdates,
    ReplicaRequest,
    ReplicaReply,
    SharedDigest,
    TaskPush,
    TaskAck,
    Barrier,
    ReclaimRequest,
    Reclaim,
    Ghost,
    EntityMove,
    EntityState,
    EntityMoved,
    MigrateRequest,
    GhostRequest,
    LoadRequest,
    LoadReply,
)

# Answers: replies that a waiting request (``Requests``, on a peer or a client) receives
# (a StealReply is not: the thief handles it). Dispatch and the client both use this list.
ANSWER_TYPES: tuple[type[Message], ...] = (
    RunStatsReply,
    ProgressReply,
    StatusReply,
    ResultReply,
    Submitted,
    ControlReply,
    LogsReply,
    PluginsReply,
    TraceReply,
    LoadReply,
    ErrorReply,
)

# Requests: messages with a ``req`` that their handler answers with a reply carrying the same
# ``req``. When the handler fails, the answer is an ErrorReply.
REQUEST_TYPES: frozenset[type[Message]] = frozenset(
    {
        StealRequest,
        RunStatsRequest,
        Submit,
        ProgressRequest,
        StatusRequest,
        ResultRequest,
        DrainRequest,
        ReclaimRequest,
        StopRequest,
        ResumeRequest,
        SuspendRequest,
        CancelRequest,
        LogsRequest,
        PluginsRequest,
        TraceRequest,
        LoadRequest,
    }
)
