"""Every message of the satind protocol: the catalogue of their type codes, which are
requests and which answers, and the protocol version.

Each message is one frozen dataclass with a type code, defined beside this module by mechanism:
messages_base.py (the base class, a connection's Hello and Bye, ErrorReply), messages_work.py
(stealing, results, what a run's master asks the members, hand-over), messages_swim.py
(membership), messages_control.py (clients: runs and the cluster) and messages_kinds.py
(shared objects, iterative and SPMD runs). Code imports them all from here (``from satind.net
import messages as m``), and codec.py resolves every field type in this module's namespace:
a message or record missing from the re-exports below stops codec.py at import.

Type codes are part of the protocol: append new ones, never renumber or reuse. A change that an
old peer cannot read bumps PROTOCOL_VERSION, which the handshake compares. Field types are
restricted to what codec.py validates: int, float, bool, str, bytes, None unions, list[T],
dict[str, T] and nested records (frozen dataclasses without a type code, records.py).

Application values (job arguments, results) travel as ``bytes`` holding their own CBOR (see
codec.encode_value): the protocol layer validates the envelope and leaves application data
opaque until the code that needs it decodes it.
"""

from __future__ import annotations

# Re-exported for codec.py, which resolves the annotation of every message's TYPE here.
from typing import ClassVar as ClassVar

from satind.net.messages_base import Bye as Bye
from satind.net.messages_base import ErrorReply as ErrorReply
from satind.net.messages_base import Hello as Hello
from satind.net.messages_base import Message as Message
from satind.net.messages_control import CancelRequest as CancelRequest
from satind.net.messages_control import ControlReply as ControlReply
from satind.net.messages_control import Drain as Drain
from satind.net.messages_control import DrainRequest as DrainRequest
from satind.net.messages_control import HistoryLog as HistoryLog
from satind.net.messages_control import HistoryReply as HistoryReply
from satind.net.messages_control import HistoryRequest as HistoryRequest
from satind.net.messages_control import LogsReply as LogsReply
from satind.net.messages_control import LogsRequest as LogsRequest
from satind.net.messages_control import PluginsReply as PluginsReply
from satind.net.messages_control import PluginsRequest as PluginsRequest
from satind.net.messages_control import ProgressReply as ProgressReply
from satind.net.messages_control import ProgressRequest as ProgressRequest
from satind.net.messages_control import Reclaim as Reclaim
from satind.net.messages_control import ReclaimRequest as ReclaimRequest
from satind.net.messages_control import ResultCopy as ResultCopy
from satind.net.messages_control import ResultReply as ResultReply
from satind.net.messages_control import ResultRequest as ResultRequest
from satind.net.messages_control import ResumeRequest as ResumeRequest
from satind.net.messages_control import RunResult as RunResult
from satind.net.messages_control import Shutdown as Shutdown
from satind.net.messages_control import StatusReply as StatusReply
from satind.net.messages_control import StatusRequest as StatusRequest
from satind.net.messages_control import StopRequest as StopRequest
from satind.net.messages_control import Submit as Submit
from satind.net.messages_control import Submitted as Submitted
from satind.net.messages_control import SuspendRequest as SuspendRequest
from satind.net.messages_control import TraceReply as TraceReply
from satind.net.messages_control import TraceRequest as TraceRequest
from satind.net.messages_control import weight_problem as weight_problem
from satind.net.messages_kinds import Barrier as Barrier
from satind.net.messages_kinds import EntityLeaving as EntityLeaving
from satind.net.messages_kinds import EntityMove as EntityMove
from satind.net.messages_kinds import EntityMoved as EntityMoved
from satind.net.messages_kinds import EntityState as EntityState
from satind.net.messages_kinds import Ghost as Ghost
from satind.net.messages_kinds import GhostRequest as GhostRequest
from satind.net.messages_kinds import MigrateRequest as MigrateRequest
from satind.net.messages_kinds import ReplicaReply as ReplicaReply
from satind.net.messages_kinds import ReplicaRequest as ReplicaRequest
from satind.net.messages_kinds import SharedDigest as SharedDigest
from satind.net.messages_kinds import SharedUpdates as SharedUpdates
from satind.net.messages_kinds import TaskAck as TaskAck
from satind.net.messages_kinds import TaskPush as TaskPush
from satind.net.messages_swim import Ack as Ack
from satind.net.messages_swim import Gossip as Gossip
from satind.net.messages_swim import Nack as Nack
from satind.net.messages_swim import Ping as Ping
from satind.net.messages_swim import PingReq as PingReq
from satind.net.messages_swim import PushPull as PushPull
from satind.net.messages_work import Abort as Abort
from satind.net.messages_work import CodeReply as CodeReply
from satind.net.messages_work import CodeRequest as CodeRequest
from satind.net.messages_work import HandOver as HandOver
from satind.net.messages_work import JobQuery as JobQuery
from satind.net.messages_work import JobResult as JobResult
from satind.net.messages_work import JobState as JobState
from satind.net.messages_work import LoadReply as LoadReply
from satind.net.messages_work import LoadRequest as LoadRequest
from satind.net.messages_work import LogCopy as LogCopy
from satind.net.messages_work import LogQuery as LogQuery
from satind.net.messages_work import LogReply as LogReply
from satind.net.messages_work import RunLog as RunLog
from satind.net.messages_work import RunShare as RunShare
from satind.net.messages_work import RunStatsReply as RunStatsReply
from satind.net.messages_work import RunStatsRequest as RunStatsRequest
from satind.net.messages_work import StealReply as StealReply
from satind.net.messages_work import StealRequest as StealRequest
from satind.net.records import AdaptDecision as AdaptDecision

# The records nested in messages (re-exported: codec.py resolves field types here).
from satind.net.records import Broadcasts as Broadcasts
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
from satind.net.records import RunRecord as RunRecord
from satind.net.records import RunStatus as RunStatus
from satind.net.records import SharedUpdate as SharedUpdate
from satind.net.records import TraceEvent as TraceEvent

# 18: SPMD step jobs that cover several iterations (EntityTask.until); holders move entities
# and tell the master (EntityLeaving).
# 17: self-adaptivity's overhead from compute time and the plugin's own benchmark
# (LoadReply.busy_s, .app_bench_cpu_s).
# 16: steal-half (StealRequest.many, StealReply.more).
# 15: the run history (HistoryRequest, HistoryReply, HistoryLog); when each line of a run's
# output was written (RunLog.times, LogsReply.times); an iterative or SPMD run's iteration in
# ProgressReply (.iteration, .iterations); when a run first started (RunInfo.started_at), for
# its elapsed time across masters; a coordinator's decisions in its status line
# (PeerStatus.decisions).
# 14: checkpoint logs of lost members (LogCopy, LogQuery, LogReply).
# 13: client API (Submit.entry/values, RunInfo.entry/owner), shipped code (Submit.files,
# RunInfo.shipped, JobSpec.shipped, CodeRequest/CodeReply).
# 19: whether an iterative task's worker had the run's shipped code (TaskAck.has_code).
# 20: an exception's args (ErrorInfo.args).
# 21: a run's weight among concurrent runs (Submit.weight, RunInfo.weight).
PROTOCOL_VERSION = 21

# Codes 20 (RunStart) and 21 (RunDone) are retired: runs are announced by gossip
# (RunAnnounce in Broadcasts). Never reuse them.
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
    EntityLeaving,
    GhostRequest,
    LoadRequest,
    LoadReply,
    CodeRequest,
    CodeReply,
    LogCopy,
    LogQuery,
    LogReply,
    HistoryRequest,
    HistoryReply,
    HistoryLog,
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
    CodeReply,
    LogReply,
    HistoryReply,
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
        CodeRequest,
        LogQuery,
        HistoryRequest,
    }
)
