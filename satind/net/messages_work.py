"""The messages among peers about the work of a run: stealing a job and returning its
result, custody queries, aborts, what a run's master asks the members (their counters and
measurements, their jobs' output), and what a leaving peer hands over.

Type codes are part of the protocol (messages.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from satind.net.messages_base import Message
from satind.net.records import (
    ErrorInfo,
    JobSpec,
    OrphanTuple,
    ReplicaDigest,
    RunAnnounce,
    RunInfo,
)

# -- work stealing -------------------------------------------------------------------------


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
    # profile, core/spmd/); -1: not measured.
    cpu: float = -1.0
    # Runs the thief does not run (refused there, or their shipped code is coming): no job
    # of those.
    skip: list[str] = field(default_factory=list)
    # The most jobs the thief takes (steal.batch_max when its compute side is idle, else
    # 1): the victim gives half of the siblings at the oldest end of its queue, at most this.
    many: int = 1


@dataclass(frozen=True)
class StealReply(Message):
    """The oldest job of the victim's queue, or None when it had none; ``more``: siblings of
    that job, next oldest first, when the thief asked for several (``StealRequest.many``)."""

    TYPE: ClassVar[int] = 11
    req: int
    job: JobSpec | None
    orphans: list[OrphanTuple] | None = None
    more: list[JobSpec] = field(default_factory=list)


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


# -- a run's counters and output, for its master -------------------------------------------


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
    admitted yet. ``progress``: its share of the asking run's progress. ``busy_s``: seconds
    its compute side spent computing (any run's jobs). ``app_bench_cpu_s``: CPU seconds the
    run's plugin's own benchmark took at its last timing here (0: it has none, or it was
    not timed here yet)."""

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
    busy_s: float
    app_bench_cpu_s: float


@dataclass(frozen=True)
class RunShare(Message):
    """A peer that drains and leaves sends the master of each run it took part in its share
    of the run's counters (the master cannot ask it when the run ends)."""

    TYPE: ClassVar[int] = 72
    run_id: str
    counters: dict[str, int | float]


@dataclass(frozen=True)
class RunLog(Message):
    """Lines that jobs of a run wrote on ``peer`` (print, logging), for the run's master;
    ``times``: when each was written, by ``peer``'s wall clock (seconds since the epoch)."""

    TYPE: ClassVar[int] = 75
    run_id: str
    peer: str
    lines: list[str]
    times: list[float]


# -- a leaving peer's work -----------------------------------------------------------------


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


# -- shipped code --------------------------------------------------------------------------


@dataclass(frozen=True)
class CodeRequest(Message):
    """A member asks for a shipped version of a run's plugin code that it lacks
    (plugin/shipped.py), by its code hash: of the run's master, or of any member with it."""

    TYPE: ClassVar[int] = 110
    req: int
    code_hash: str


@dataclass(frozen=True)
class CodeReply(Message):
    """The version's files by relative path, or why not (``error``); the asker checks the
    hash before it writes or imports anything."""

    TYPE: ClassVar[int] = 111
    req: int
    code_hash: str
    files: dict[str, bytes] = field(default_factory=dict)
    error: str = ""


# -- checkpoint logs of lost members ---------------------------------------------------------


@dataclass(frozen=True)
class LogCopy(Message):
    """Records a peer appended to its checkpoint log, for a member that keeps a copy of it
    (``[checkpoint] copies``): a survivor reads a lost member's log from the copy when no
    shared directory has it. ``reset``: the records are the whole log (it was pruned, or the
    keeper is new); what the keeper had is replaced."""

    TYPE: ClassVar[int] = 112
    peer: str
    records: bytes
    reset: bool = False


@dataclass(frozen=True)
class LogQuery(Message):
    """A survivor about to restart the jobs a lost member took asks a keeper of that member's
    log for the logged results at or below them (``runs[i]``, ``paths[i]``)."""

    TYPE: ClassVar[int] = 113
    req: int
    peer: str
    runs: list[str]
    paths: list[bytes]


@dataclass(frozen=True)
class LogReply(Message):
    """The logged results a keeper has (``error``: why none)."""

    TYPE: ClassVar[int] = 114
    req: int
    results: list[JobResult] = field(default_factory=list)
    error: str = ""
