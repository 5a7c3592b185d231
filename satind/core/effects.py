"""What the protocol core asks its driver to do.

Core handlers are synchronous functions of the peer's state, an event and the time; they
change the state and return a list of effects. They never touch a socket, a timer, a thread
or the clock: the driver (``node/peer.py``) applies the effects, in order, and the tests
compare them (h11's and Dask's worker state machine's pattern).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from satind.core.model.timers import TimerEvent
from satind.net import messages as m
from satind.net.parties import Link as Link
from satind.work.events import MailboxEvent
from satind.work.jobs import Job


@dataclass(frozen=True, slots=True)
class Send:
    """Send a message to a member (by name; the transport dials it if needed)."""

    dest: str
    msg: m.Message


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer on the connection a request came on (the asker may be a client)."""

    link: Link
    msg: m.Message


@dataclass(frozen=True, slots=True)
class ToCompute:
    """Post an event to the compute side's mailbox."""

    event: MailboxEvent


@dataclass(frozen=True, slots=True)
class QueueRoot:
    """Put a run's root at the oldest end of the work queue and wake the compute side."""

    job: Job


@dataclass(frozen=True, slots=True)
class Spread:
    """Gossip news epidemically: a run's announcement or an orphan tuple."""

    item: m.RunAnnounce | m.OrphanTuple


@dataclass(frozen=True, slots=True)
class Log:
    """Append to this peer's checkpoint log: a run's descriptor ("run"), its end ("end"), a
    finished result ("result"), or an iterative or SPMD run's newest barrier ("barrier")."""

    kind: Literal["run", "end", "result", "barrier"]
    record: m.RunAnnounce | m.JobResult | m.Barrier


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Checkpoint now: after a theft (policy "tic" forces one), or at once ("flush": a run is
    being suspended)."""

    why: Literal["theft", "flush"]


TaskKind = Literal["finish_run", "forward_result", "check_run"]


@dataclass(frozen=True, slots=True)
class Task:
    """Start a procedure that has to wait (for other members' answers): gather a finished
    run's statistics and end it, forward a run's result to a client once its master has it,
    ask a run's master whether the run is over."""

    kind: TaskKind
    run_id: str
    dest: str = ""


@dataclass(frozen=True, slots=True)
class HandOut:
    """Give a job (and ``more``, its siblings in the reply's ``more``) to a thief: send the
    steal reply that carries them on the request's connection. If the reply cannot go, they
    stay here (``victim.not_handed_out``)."""

    link: Link
    reply: m.StealReply
    job: Job
    more: list[Job] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class EncodeArgs:
    """A thief asked for a job whose arguments are large: encode them off the network side
    (a worker thread), then hand it out (``victim.hand_out``)."""

    link: Link
    request: m.StealRequest
    job: Job


@dataclass(frozen=True, slots=True)
class WakeWaiters:
    """Whoever waits here for a run's result: it is here now, or the run moved to another
    master (they look again)."""

    run_id: str


@dataclass(frozen=True, slots=True)
class StealUpdate:
    """Whether to steal may have changed (work wanted, runs active, draining)."""


@dataclass(frozen=True, slots=True)
class Timer:
    """After ``delay`` seconds, hand ``event`` back to the core (``core/timers.fire``): a
    combining interval that ends, a guard that waited long enough (core/sharing.py), a
    scheduler's slot (core/iterative.py), a move or a step that waits too long
    (core/spmd/). Data, not a closure: tests compare timers by equality."""

    delay: float
    event: TimerEvent


# Levels of a ``Note``: the numbers of Python's logging levels, so that the node logs a note
# as it is (the core imports no logging).
DEBUG, INFO, WARNING, ERROR = 10, 20, 30, 40


@dataclass(frozen=True, slots=True)
class Note:
    """A line for the peer's log. The core logs nothing itself: a rule notes what it did in
    the state (``PeerState.note``) and the node writes the notes to the log after it applied
    the rule's effects, under ``logger`` (the rule's module), so the log reads as before."""

    level: int
    logger: str
    message: str
    args: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class FetchCode:
    """Get a shipped version of plugin code this peer lacks (plugin/shipped.py): ask
    ``sources`` in turn (the run's master first), check, vet and load it, and report
    ``CodeArrived`` (core/shipping.py) either way."""

    code_hash: str
    sources: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ReadLog:
    """Read what lost member ``peer`` logged at or below the jobs ``wanted`` (run id, path):
    from the checkpoint directory if it has the log (a shared one), else from ``keepers``
    (members that may keep a copy of it), in turn. Report ``LogRead`` (core/logged.py) with
    ``token`` either way, within ``[checkpoint] read_wait_s``."""

    token: int
    peer: str
    wanted: tuple[tuple[str, bytes], ...]
    keepers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Remember:
    """A run's result was kept here (``RunTable.finished``: as its master, or a copy):
    record the run in the machine's run history (node/recorder.py)."""

    run_id: str


@dataclass(frozen=True, slots=True)
class Changed:
    """Wake whoever waits for this peer's state to change (a drain, a join)."""


Effect = (
    Send
    | Reply
    | ToCompute
    | QueueRoot
    | Spread
    | Log
    | Checkpoint
    | Task
    | HandOut
    | EncodeArgs
    | WakeWaiters
    | StealUpdate
    | Changed
    | Timer
    | FetchCode
    | ReadLog
    | Remember
)
Effects = list[Effect]
