"""Traces of runs: what each peer records, and the Chrome trace-event JSON built from it.

Every peer records, per run, a bounded ring of events (``RunTrace``, the newest
``trace.max_events``) for its last ``trace.keep_runs`` runs:

* on the compute side, a span per job that has no local parent (a run's root, a stolen job:
  everything below it that ran here is inside the span, with the count in its arguments), and
  a span per blocking wait of a sync for children other peers run;
* on the network side, a span per steal that brought a job (request to reply, local or
  wide), failed steals merged into one span per streak, and instants for recovery: jobs put
  back after their thief was lost, a new master or epoch, orphan results reused, a drain.

Nothing is recorded per spawn or sync: the engine's hot path does not see tracing (a job
without a local parent costs two clock reads and an append). That is why recording is always
on: a trace can be asked for after a run, with no protocol field to say "record this run".

``chrome_trace`` turns the events of every peer into the JSON that ui.perfetto.dev and
chrome://tracing load: a process per peer (its track, named by ``process_name``) with a
thread per kind of event (``thread_name``), timestamps in microseconds from the run's first
event. Peers stamp events with their own ``time.time()``: tracks of one machine line up
exactly, tracks of different machines only as well as their clocks agree.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from satind.config import TraceConfig
from satind.net.records import TraceEvent

# The threads of a peer's track, in the order shown (their Chrome tids).
COMPUTE, STEALS_LOCAL, STEALS_WIDE, EVENTS = "compute", "steals (local)", "steals (wide)", "events"
TRACKS: tuple[str, ...] = (COMPUTE, STEALS_LOCAL, STEALS_WIDE, EVENTS)
INSTANT = -1.0  # the duration of an instant event


class RunTrace:
    """One run's events on one peer: the newest ``cap`` (appended from both threads)."""

    def __init__(self, cap: int) -> None:
        self.events: deque[TraceEvent] = deque(maxlen=cap)
        self.total = 0
        self._lock = threading.Lock()

    def add(self, event: TraceEvent) -> None:
        with self._lock:
            self.events.append(event)
            self.total += 1

    @property
    def dropped(self) -> int:
        return self.total - len(self.events)


@dataclass
class _Streak:
    """Failed steals in a row of one kind (local or wide), reported as one span."""

    runs: tuple[str, ...]
    first: float
    last: float
    count: int = 1


class Traces:
    """A peer's traces, by run id (bounded: ``keep_runs`` runs of ``max_events`` each)."""

    def __init__(self, cfg: TraceConfig) -> None:
        self.cfg = cfg
        self._runs: OrderedDict[str, RunTrace] = OrderedDict()
        self._lock = threading.Lock()
        self._streaks: dict[bool, _Streak] = {}

    def of(self, run_id: str) -> RunTrace:
        """The run's trace, made on first use (the oldest run's is forgotten past
        ``keep_runs``)."""
        with self._lock:
            trace = self._runs.get(run_id)
            if trace is None:
                trace = self._runs[run_id] = RunTrace(self.cfg.max_events)
                while len(self._runs) > self.cfg.keep_runs:
                    self._runs.popitem(last=False)
            return trace

    def get(self, run_id: str) -> RunTrace | None:
        with self._lock:
            return self._runs.get(run_id)

    def add(self, run_id: str, track: str, cat: str, name: str, at: float, dur: float = INSTANT,
            detail: str = "") -> None:  # fmt: skip
        self.of(run_id).add(TraceEvent(track, cat, name, at, dur, detail))

    # -- the compute side ---------------------------------------------------------------------

    def job(self, run_id: str, name: str, start: float, end: float, jobs: int) -> None:
        """A job without a local parent ran from ``start`` to ``end``; ``jobs`` ran in it
        here (itself, its local descendants, jobs its syncs stole)."""
        self.add(run_id, COMPUTE, "job", name, start, end - start, f"{jobs} jobs")

    def wait(self, run_id: str, start: float, end: float) -> None:
        """A sync of the run blocked for children other peers run (when long enough)."""
        if end - start >= self.cfg.min_wait_s:
            self.add(run_id, COMPUTE, "sync", "sync waits", start, end - start)

    # -- the network side ---------------------------------------------------------------------

    def steal(
        self, runs: Sequence[str], victim: str, wide: bool, start: float, got: str | None
    ) -> None:
        """A steal request to ``victim`` sent at ``start``, answered now; ``got`` is the run
        of the job it brought (None: nothing). A failure goes to ``runs`` (those the thief
        stole for), merged with the failures before it."""
        now = time.time()
        streak = self._streaks.get(wide)
        if got is None:
            if streak is not None and start - streak.last <= self.cfg.streak_gap_s:
                streak.last, streak.count = now, streak.count + 1
                return
            self._close(wide)
            if runs:
                self._streaks[wide] = _Streak(tuple(runs), start, now)
            return
        self._close(wide)
        track = STEALS_WIDE if wide else STEALS_LOCAL
        self.add(got, track, "steal", f"stole from {victim}", start, now - start,
                 "wide" if wide else "local")  # fmt: skip

    def _close(self, wide: bool) -> None:
        streak = self._streaks.pop(wide, None)
        if streak is None:
            return
        track = STEALS_WIDE if wide else STEALS_LOCAL
        name = f"{streak.count} failed steal{'s' if streak.count > 1 else ''}"
        for run_id in streak.runs:
            self.add(run_id, track, "steal", name, streak.first, streak.last - streak.first)

    def flush(self) -> None:
        """Report the failure streaks still open (before a trace is read)."""
        for wide in (False, True):
            self._close(wide)

    def instant(self, runs: Iterable[str], name: str, detail: str = "") -> None:
        """A recovery event, on the track of every run in ``runs``."""
        now = time.time()
        for run_id in runs:
            self.add(run_id, EVENTS, "recovery", name, now, INSTANT, detail)


def chrome_trace(
    peers: Sequence[tuple[str, Sequence[TraceEvent], int]], run_id: str
) -> dict[str, Any]:
    """The Chrome trace-event JSON of a run from each peer's (name, events, dropped): one
    process per peer, a thread per track, microseconds from the first event."""
    starts = [e.at for _, events, _ in peers for e in events]
    zero = min(starts) if starts else 0.0
    out: list[dict[str, Any]] = []
    for pid, (name, events, dropped) in enumerate(sorted(peers), start=1):
        label = f"{name} ({dropped} older events dropped)" if dropped else name
        out.append(_meta("process_name", pid, 0, label))
        out.append(
            {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": pid}}
        )
        for tid, track in enumerate(TRACKS, start=1):
            out.append(_meta("thread_name", pid, tid, track))
        for event in events:
            tid = TRACKS.index(event.track) + 1 if event.track in TRACKS else len(TRACKS)
            item: dict[str, Any] = {
                "name": event.name,
                "cat": event.cat,
                "ts": round((event.at - zero) * 1e6, 1),
                "pid": pid,
                "tid": tid,
                "args": {"run": run_id, **({"detail": event.detail} if event.detail else {})},
            }
            if event.dur == INSTANT:
                item.update(ph="i", s="t")
            else:
                item.update(ph="X", dur=round(max(event.dur, 0.0) * 1e6, 1))
            out.append(item)
    return {"traceEvents": out, "displayTimeUnit": "ms", "otherData": {"run_id": run_id}}


def _meta(kind: str, pid: int, tid: int, name: str) -> dict[str, Any]:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {"name": name}}


def save(path: Path, peers: Sequence[tuple[str, Sequence[TraceEvent], int]], run_id: str) -> str:
    """Write a run's trace to ``path``; what to tell the user about it."""
    trace = chrome_trace(peers, run_id)
    path.write_text(json.dumps(trace))
    events = sum(len(events) for _, events, _ in peers)
    return (
        f"trace of run {run_id} ({events} events from {len(peers)} peers) written to {path}; "
        "open it in https://ui.perfetto.dev"
    )
