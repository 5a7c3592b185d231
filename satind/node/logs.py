"""Per-run logs: what a plugin prints or logs inside a job, kept with its run.

On a peer process, ``capture`` routes writes to ``sys.stdout``/``sys.stderr`` and records of
the ``logging`` module made on the compute thread to the run of the job that is running
(``Worker.current``); everything else (the peer's own log, the launcher's handshake) goes
where it went. Lines are bounded per run on each peer (``run.log_lines``, longer lines cut at
``run.log_line_chars``), sent to the run's master every ``run.log_flush_s`` (``RunLog``), and
kept there, bounded the same way per run, for ``satind logs RUN_ID [--follow]`` and for
``satind run``, which prints them as they come (``LogsRequest``/``LogsReply``; any peer
relays to the master). Each line travels with the time it was written, by the wall clock of
the peer that captured it: the master's clock, or when a line reached it, would put a line
``run.log_flush_s`` late, and lines of different peers out of the order they were written.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TextIO

import trio

from satind.config import RunConfig
from satind.core.runs import ENDED
from satind.engine import worker as worker_mod
from satind.net import messages as m
from satind.net.names import slot_of
from satind.node import recorder
from satind.node.host import Host
from satind.node.rpc import ask

if TYPE_CHECKING:
    from satind.net.transport import Link

COMPUTE_THREAD = "satind-compute"

# A line of output and when it was written (seconds since the epoch, the capturing peer's
# wall clock).
Stamped = tuple[float, str]


class RunLogs:
    """This peer's captured lines, not yet sent, and (as a master) its runs' logs."""

    def __init__(self, cfg: RunConfig, name: str, clock: Callable[[], float] = time.time) -> None:
        self.cfg = cfg
        self.name = name
        self.clock = clock
        self._lock = threading.Lock()
        self._pending: dict[str, list[Stamped]] = {}
        self._dropped: dict[str, int] = {}
        # The unfinished last line per run (``print`` writes the text, then the newline) and
        # when its first part came, and those as they were at the last ``take``: one that has
        # not changed since is sent as it is.
        self._partial: dict[str, str] = {}
        self._partial_at: dict[str, float] = {}
        self._stale: dict[str, str] = {}
        # run id -> every line the master has (bounded), numbered from 0.
        self.kept: OrderedDict[str, deque[Stamped]] = OrderedDict()
        self.first: dict[str, int] = {}  # number of the oldest line kept, per run
        # Set when a run ends here: its last lines are sent at once, not at the next tick.
        self.wake = trio.Event()

    # -- the compute thread --------------------------------------------------------------

    def capture(self, run_id: str, text: str) -> None:
        """Lines a job of ``run_id`` wrote (any thread; cheap). A line is stamped with the
        time its first part was written."""
        now = self.clock()
        with self._lock:
            at = self._partial_at.pop(run_id, now)
            *done, rest = (self._partial.pop(run_id, "") + text).split("\n")
            for line in done:
                self._add(run_id, at, line)
                at = now
            if rest:
                self._partial[run_id] = rest[: self.cfg.log_line_chars]
                self._partial_at[run_id] = at

    def _add(self, run_id: str, at: float, line: str) -> None:
        lines = self._pending.setdefault(run_id, [])
        if len(lines) >= self.cfg.log_lines:
            self._dropped[run_id] = self._dropped.get(run_id, 0) + 1
        else:
            lines.append((at, line.rstrip("\r")[: self.cfg.log_line_chars]))

    def take(self) -> dict[str, list[Stamped]]:
        """What was captured since the last call (the trio thread sends it)."""
        with self._lock:
            for run_id, line in self._stale.items():
                if self._partial.get(run_id) == line:
                    self._add(run_id, self._partial_at.pop(run_id), self._partial.pop(run_id))
            self._stale = dict(self._partial)
            pending, self._pending = self._pending, {}
            dropped, self._dropped = self._dropped, {}
        for run_id, count in dropped.items():
            pending.setdefault(run_id, []).append(
                (
                    self.clock(),
                    f"[{count} lines dropped: run.log_lines is {self.cfg.log_lines} per peer]",
                )
            )
        return pending

    # -- the master ----------------------------------------------------------------------

    def keep(self, run_id: str, peer: str, lines: list[Stamped]) -> None:
        kept = self.kept.get(run_id)
        if kept is None:
            kept = self.kept[run_id] = deque(maxlen=self.cfg.log_lines)
            self.first[run_id] = 0
            while len(self.kept) > self.cfg.keep_results:
                old, _ = self.kept.popitem(last=False)
                self.first.pop(old, None)
        # Lines say which slot (b/0) they came from: peers as the operator names them.
        where = slot_of(peer)
        for at, line in lines:
            if len(kept) == kept.maxlen:
                self.first[run_id] += 1
            kept.append((at, f"{where}: {line[: self.cfg.log_line_chars]}"))

    def since(self, run_id: str, start: int) -> tuple[list[Stamped], int]:
        """Lines from number ``start`` on (or the oldest kept), and the next number."""
        kept = self.kept.get(run_id)
        if kept is None:
            return [], start
        first = self.first[run_id]
        lines = list(kept)[max(0, start - first) :]
        return lines, first + len(kept)


class _Router:
    """``sys.stdout``/``sys.stderr`` on a peer: the compute thread's writes inside a job go
    to that job's run; the rest to the real stream."""

    def __init__(self, real: TextIO, logs: RunLogs) -> None:
        self.real = real
        self.logs = logs

    def write(self, text: str) -> int:
        run_id = _current_run()
        if run_id is None:
            return self.real.write(text)
        self.logs.capture(run_id, text)
        return len(text)

    def flush(self) -> None:
        self.real.flush()

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)


class _Handler(logging.Handler):
    """Records made on the compute thread inside a job go to that job's run (and only
    there: a plugin's logging is the run's, not the peer's)."""

    def __init__(self, logs: RunLogs) -> None:
        super().__init__()
        self.logs = logs
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        run_id = _current_run()
        if run_id is not None:
            self.logs.capture(run_id, self.format(record) + "\n")


class _NotInJob(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return _current_run() is None


def _current_run() -> str | None:
    if threading.current_thread().name != COMPUTE_THREAD:
        return None
    worker = worker_mod.CURRENT
    if worker is None or worker.current is worker.idle_frame:
        return None
    return worker.current.run.run_id


def capture(logs: RunLogs) -> None:
    """Route this process's job output to ``logs`` (peer processes only)."""
    sys.stdout = _Router(sys.stdout, logs)
    sys.stderr = _Router(sys.stderr, logs)
    root = logging.getLogger()
    for handler in root.handlers:
        handler.addFilter(_NotInJob())
    root.addHandler(_Handler(logs))


class LogsHost(Host, Protocol):
    """A peer with run logs (what this module's loops and handlers use)."""

    logs: RunLogs


async def flush_loop(peer: LogsHost) -> None:
    """Send what jobs wrote to their runs' masters (kept here for runs mastered here)."""
    while True:
        with trio.move_on_after(peer.cfg.run.log_flush_s):
            await peer.logs.wake.wait()
        peer.logs.wake = trio.Event()
        for run_id, lines in peer.logs.take().items():
            owner = peer.state.runs.master_of(run_id, peer.name)
            if owner is None or owner == peer.name:
                peer.logs.keep(run_id, peer.name, lines)
            else:
                times = [at for at, _ in lines]
                peer.post(owner, m.RunLog(run_id, peer.name, [ln for _, ln in lines], times))


def on_run_log(peer: LogsHost, link: Link, msg: m.RunLog) -> None:
    # Only for runs mastered here, and cut as the sender should have: what a member sends
    # costs at most run.log_lines lines of run.log_line_chars per run this peer masters.
    if peer.state.runs.master_of(msg.run_id, peer.name) == peer.name:
        # A line without its time (a sender that sent fewer) gets the time it came here.
        times = [*msg.times, *[peer.logs.clock()] * (len(msg.lines) - len(msg.times))]
        peer.logs.keep(msg.run_id, msg.peer[:100], list(zip(times, msg.lines, strict=False)))


def on_logs_request(peer: LogsHost, link: Link, msg: m.LogsRequest) -> None:
    async def answer() -> None:
        owner = peer.state.runs.master_of(msg.run_id, peer.name)
        if owner is not None and owner != peer.name and not peer.state.is_gone(owner):
            reply = await ask(
                peer,
                owner,
                lambda req: m.LogsRequest(req, msg.run_id, msg.start),
                m.LogsReply,
                peer.cfg.client.timeout_s,
            )
            if reply is not None:
                link.post(
                    m.LogsReply(
                        msg.req, reply.lines, reply.times, reply.next, reply.over, reply.error
                    )
                )
                return
        stamped, next_ = peer.logs.since(msg.run_id, msg.start)
        lines, times = [line for _, line in stamped], [at for at, _ in stamped]
        status = peer.state.runs.status_of(msg.run_id)
        error = ""
        if msg.run_id not in peer.logs.kept and status not in ("running", "queued"):
            # Not kept in memory here (it ended before this peer started, or long ago): the
            # run history keeps the tail of its output (node/recorder.py).
            found, why = await recorder.gather(peer, m.HistoryRequest(0, msg.run_id))
            if found and found[0].state in ENDED:
                tail, at = found[0].log, found[0].log_times
                at = (list(at) + [0.0] * len(tail))[: len(tail)]
                reply = m.LogsReply(msg.req, tail[msg.start :], at[msg.start :], len(tail), True)
                link.post(reply)
                return
            if status == "unknown":
                error = f"no run {msg.run_id} here" + (f" ({why})" if why else "")
        over = status not in ("running", "queued")
        link.post(m.LogsReply(msg.req, lines, times, next_, over, error))

    peer.spawn_answer(link, msg.req, answer)
