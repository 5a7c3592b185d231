"""What clients ask of the peers of a daemon, and the orders peers relay to each other on
their behalf: submitting a run and following it (progress, result, output, trace), suspending,
resuming or cancelling it; the cluster's status and plugins, draining, stopping and reclaiming
its peers. A run's result is kept by other members than its master (ResultCopy), so that a
client can still fetch it when the master is gone.

Type codes are part of the protocol (messages.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from satind.net.messages_base import Message
from satind.net.records import (
    ErrorInfo,
    MemberPlugins,
    PeerStatus,
    RunInfo,
    RunRecord,
    RunStatus,
    TraceEvent,
)

# -- runs ----------------------------------------------------------------------------------


# The largest weight a run may be given (``Submit.weight``): beside a run of weight 1 it is
# stolen from this many times as often, which is as good as "only this run".
MAX_WEIGHT = 1000.0


def weight_problem(weight: float) -> str:
    """Why ``weight`` cannot be a run's weight, or "" (the client and the master both ask)."""
    if not 0.0 < weight <= MAX_WEIGHT:
        return (
            f"a run's weight must be more than 0 and at most {MAX_WEIGHT:g}, not {weight:g} "
            "(1 is the default; 2 gets a run twice the steals of a run of weight 1)"
        )
    return ""


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
    # A run of one spawnable function of the plugin's module with Python values (the client
    # API's ``cluster.submit(fn, *args)``): its qualified name there, and the CBOR of its
    # arguments' tuple. ``argv`` is then empty and the plugin's parse does not run.
    entry: str = ""
    values: bytes = b""
    # Shipped code (plugin/shipped.py): the plugin directory's Python files by relative path;
    # ``code_hash`` is then their hash, which the master checks. Empty: installed code.
    files: dict[str, bytes] = field(default_factory=dict)
    # The run's share of thieves' steals beside other runs (work/workqueue.py): a run of
    # weight 2 is stolen from twice as often as one of weight 1. In (0, MAX_WEIGHT].
    weight: float = 1.0


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
    # Made on the master by the plugin's own code (plugin/hooks.judge): the CBOR of what its
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
    """Fraction of the run's work finished (0..1: of its tree, from job ids; of its
    iterations, for an iterative or SPMD run that knows how many it makes) and cluster-wide
    counters so far. ``iteration``: an iterative or SPMD run's iterations done (-1: a
    divide-and-conquer run); ``iterations``: how many it makes (0: not known beforehand, as
    for an iterative run that stops when its plugin says)."""

    TYPE: ClassVar[int] = 34
    req: int
    run_id: str
    progress: float
    counters: dict[str, int | float]
    iteration: int = -1
    iterations: int = 0


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
class ResultCopy(Message):
    """A finished run's result, sent by its master to ``run.result_copies`` other members to
    keep: the result outlives its master. ``state``: done, failed or cancelled."""

    TYPE: ClassVar[int] = 74
    info: RunInfo
    state: str
    result: RunResult


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
class LogsRequest(Message):
    """A run's output from line number ``start`` on (relayed to the master by any peer)."""

    TYPE: ClassVar[int] = 76
    req: int
    run_id: str
    start: int


@dataclass(frozen=True)
class LogsReply(Message):
    """``times``: when each line was written, by its peer's wall clock (seconds since the
    epoch); ``next``: the number to ask from next time; ``over``: the run is no longer live."""

    TYPE: ClassVar[int] = 77
    req: int
    lines: list[str]
    times: list[float]
    next: int
    over: bool
    error: str = ""


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


# -- the cluster ---------------------------------------------------------------------------


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
class DrainRequest(Message):
    """Drain the named peers, or every peer of ``cluster``."""

    TYPE: ClassVar[int] = 64
    req: int
    peers: list[str]
    cluster: str = ""
    # seconds the drained peers finish their work before they cut it and leave (§3.3's leave;
    # 0: at once); negative: each peer's [daemon] drain_deadline_s.
    deadline_s: float = -1.0


@dataclass(frozen=True)
class StopRequest(Message):
    """Stop the answering peer's machine (``every``: all members); ``drain``: each peer
    finishes its work and hands its results over before it leaves."""

    TYPE: ClassVar[int] = 65
    req: int
    every: bool
    drain: bool = False
    deadline_s: float = -1.0  # with ``drain``: as DrainRequest's


@dataclass(frozen=True)
class ReclaimRequest(Message):
    """Client to any peer: the named peers' machines are reclaimed by their owner
    (``reclaim`` True: they suspend their work and take none) or released (False)."""

    TYPE: ClassVar[int] = 100
    req: int
    peers: list[str]
    reclaim: bool


@dataclass(frozen=True)
class ControlReply(Message):
    TYPE: ClassVar[int] = 66
    req: int
    ok: bool
    message: str
    affected: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Drain(Message):
    """Peer to peer: stop taking work, finish it, leave. ``leaving``: every peer drained by
    the same request (a machine's, a cluster's), none of which may inherit a run."""

    TYPE: ClassVar[int] = 67
    reason: str
    leaving: list[str] = field(default_factory=list)
    deadline_s: float = -1.0  # as DrainRequest's


@dataclass(frozen=True)
class Shutdown(Message):
    """Stop the receiving peer: leave gracefully and exit."""

    TYPE: ClassVar[int] = 40
    reason: str


@dataclass(frozen=True)
class Reclaim(Message):
    """Peer to peer: you are reclaimed (or released), as a client asked."""

    TYPE: ClassVar[int] = 101
    reclaim: bool
    reason: str


@dataclass(frozen=True)
class HistoryRequest(Message):
    """Runs from the run history (node/history.py): ``run_id`` one run (its log tail
    included), else the newest ``limit`` that ended after ``since`` (wall-clock seconds; 0:
    any) in ``states`` (empty: any). ``local``: this peer's machine only (a peer asking one
    peer per machine), else the whole system's, merged. Answered by a HistoryReply."""

    TYPE: ClassVar[int] = 115
    req: int
    run_id: str = ""
    states: list[str] = field(default_factory=list)
    since: float = 0.0
    limit: int = 20
    local: bool = False


@dataclass(frozen=True)
class HistoryReply(Message):
    """``error`` says why a peer has no history (off, or its file refused)."""

    TYPE: ClassVar[int] = 116
    req: int
    runs: list[RunRecord]
    error: str = ""


@dataclass(frozen=True)
class HistoryLog(Message):
    """A finished run's output, from its master to the members that keep copies of its
    result (ResultCopy), for their run history: so that the lines outlive the master's
    machine. Sent once, when the master records the run (history.record_delay_s)."""

    TYPE: ClassVar[int] = 117
    run_id: str
    lines: list[str]
    # When each line was written (LogsReply.times).
    times: list[float] = field(default_factory=list)
