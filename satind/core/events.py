"""What the core decides on: every stimulus a peer gets, as plain data, each routed by
``core/handle.py`` to its rule. From the wire and from gossip: a member's message
(``Received``), a membership change (``MemberChanged``), runs and orphan tuples gossip brought
(``RunsHeard``, ``TuplesHeard``), an orphan table with a steal reply (``OrphanTable``). From the
node's procedures, once what they waited for is in (node/control.py): a submission its plugin
parsed (``SubmissionParsed``), a finished run's statistics and verdict (``RunJudged``), a
checkpointed run loaded for a resume (``ResumeLoaded``), an operator's suspend or cancel
(``SuspendAsked``, ``CancelAsked``), a master's answer about a run we still track
(``MasterAnswered``), a stolen job's large arguments encoded (``ArgsEncoded``), a steal reply
that could not be sent (``ReplyNotSent``), the custody round (``CustodyRound``), a drain's
steps (``DrainAsked``, ``DrainRound``, ``DrainDeadlinePassed``, ``DrainDone``) and what the
node learns of its own peer (``Synced``, ``ReclaimChanged``, ``PluginsChanged``,
``CheckpointsFound``, ``CpuShareMeasured``: core/here.py). The
compute side's reports (``work/reports.py``) and the timers' events (``core/model/timers.py``)
are the rest; so are shipped code that arrived and a lost member's log read, which live with
their mechanisms (core/shipping.py, core/logged.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from satind.descriptor import Parsed, Plugin, Verdict
from satind.files import InputNeeded
from satind.membership.view import Change
from satind.net import codec
from satind.net import messages as m
from satind.net.parties import Link
from satind.work.jobs import Job


@dataclass(frozen=True, slots=True)
class Received:
    """A member's message, on ``link``."""

    link: Link
    msg: m.Message


@dataclass(frozen=True, slots=True)
class MemberChanged:
    """SWIM changed a member's state (joined, suspected, dead, left, a newer instance)."""

    change: Change


@dataclass(frozen=True, slots=True)
class RunsHeard:
    """Gossip brought news of runs."""

    runs: Sequence[m.RunAnnounce]


@dataclass(frozen=True, slots=True)
class TuplesHeard:
    """Gossip brought orphan tuples."""

    tuples: Sequence[m.OrphanTuple]


@dataclass(frozen=True, slots=True)
class OrphanTable:
    """A victim's orphan table, with the reply to this peer's first steals."""

    tuples: list[m.OrphanTuple]


@dataclass(frozen=True, slots=True)
class SubmissionParsed:
    """A client's submission, its plugin's parse run (satind/plugin/hooks.py): the parsed
    arguments, what the plugin raised, or the input file it needs from the client."""

    link: Link
    msg: m.Submit
    parsed: Parsed | Exception | InputNeeded


@dataclass(frozen=True, slots=True)
class RunJudged:
    """A run's root finished at ``root_done``: every member's share of its counters is in,
    and the plugin judged its value (``verdict``; None when it raised or nothing to judge)."""

    run_id: str
    shares: Sequence[dict[str, float]]
    verdict: Verdict | None
    root_done: float


@dataclass(frozen=True, slots=True)
class ResumeLoaded:
    """``satind resume``: the run's checkpoint is loaded (its descriptor, results, barrier)."""

    link: Link
    req: int
    info: m.RunInfo
    results: Sequence[m.JobResult]
    barrier: m.Barrier | None


@dataclass(frozen=True, slots=True)
class SuspendAsked:
    """An operator asks this peer, the run's master, to suspend it."""

    run_id: str


@dataclass(frozen=True, slots=True)
class CancelAsked:
    """An operator asks this peer, the run's master, to cancel it."""

    run_id: str


@dataclass(frozen=True, slots=True)
class MasterAnswered:
    """The master of a run we still track answered whether it is over (None: no answer)."""

    run_id: str
    reply: m.Message | None


@dataclass(frozen=True, slots=True)
class ArgsEncoded:
    """A stolen job's large arguments, encoded in a worker thread (or why they cannot be),
    with the shared objects they refer to: the job can be handed out now."""

    link: Link
    request: m.StealRequest
    job: Job
    args: bytes | codec.EncodeError
    shared: list[str]


@dataclass(frozen=True, slots=True)
class ReplyNotSent:
    """A steal reply carrying jobs could not be sent (the thief's connection is gone): the
    jobs come back."""

    reply: m.StealReply
    job: Job
    more: Sequence[Job]


@dataclass(frozen=True, slots=True)
class CustodyRound:
    """Every ``steal.custody_check_s``: ask thieves about overdue jobs, take over runs whose
    master is gone and that nobody took over."""


@dataclass(frozen=True, slots=True)
class DrainAsked:
    """Drain this peer (``reason``); ``leaving``: the members drained with it (none of them
    inherits a run)."""

    reason: str
    leaving: Sequence[str]


@dataclass(frozen=True, slots=True)
class DrainRound:
    """A draining peer looks again (something changed): the runs it masters go to a peer that
    stays, once there is one."""


@dataclass(frozen=True, slots=True)
class DrainDeadlinePassed:
    """The drain's deadline passed: cut the work left."""


@dataclass(frozen=True, slots=True)
class DrainDone:
    """The drain is over (or cut): this peer leaves."""


@dataclass(frozen=True, slots=True)
class Synced:
    """This peer has synced its member table with the system (after a join or a restart)."""


@dataclass(frozen=True, slots=True)
class ReclaimChanged:
    """The machine's owner reclaimed it (True) or released it; ``standby``: whether the peer
    waits to be admitted (None: as it was)."""

    reclaimed: bool
    standby: bool | None = None


@dataclass(frozen=True, slots=True)
class PluginsChanged:
    """The plugins were loaded again: what was found, and what this peer cannot meet."""

    found: dict[str, Plugin]
    unmet: Mapping[tuple[str, str], str]


@dataclass(frozen=True, slots=True)
class CheckpointsFound:
    """The unfinished runs this peer's checkpoint directory could resume."""

    runs: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class CpuShareMeasured:
    """The share of a CPU one more thread would get here."""

    share: float
