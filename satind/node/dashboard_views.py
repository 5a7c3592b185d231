"""What the dashboard's page shows (node/dashboard.py serves it): the system's snapshot, a
run's page and its trace, as JSON, each read as the browser's certificate may read it.

A snapshot asks every member (as `satind status` does), so one is made per ``refresh_s`` and
shared by every open page; what a reader may not see of it (the arguments of other clients'
runs, for a certificate without the operate grant: node/permissions.py) is taken out of a
copy for that reader.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import trio

from satind import trace
from satind.config import DashboardConfig
from satind.net import codec, tls
from satind.net import messages as m
from satind.node import permissions, recorder, status
from satind.node.control import fetch_result
from satind.node.recorder import RecorderHost
from satind.node.rpc import ask, ask_all


@dataclass(frozen=True)
class Reader:
    """Who reads: the name and grants of the browser's client certificate over TLS; without
    TLS the dashboard's own guards (loopback, its token) let in whoever may see everything."""

    name: str = ""
    grants: frozenset[str] = frozenset(tls.GRANTS)


EVERYTHING = Reader()


def reader_of(certificate: dict[str, Any] | None) -> Reader:
    """The reader behind a verified certificate (None: no TLS, ``EVERYTHING``). A member's
    certificate may read what a member may (everything, as node/permissions.py lets members
    ask anything); one that is neither a member's nor a client's may read nothing."""
    if certificate is None:
        return EVERYTHING
    try:
        name, role, grants = tls.certificate_identity(certificate)
    except ValueError:
        return Reader("?", frozenset())
    if role == tls.ROLE_PEER:
        return Reader(name)
    return Reader(name, grants if role == tls.ROLE_CLIENT else frozenset())


class Views:
    """The JSON behind one peer's page."""

    def __init__(self, peer: RecorderHost, cfg: DashboardConfig) -> None:
        self.peer = peer
        self.cfg = cfg
        self.refresh_s = cfg.refresh_s
        self._snapshot: dict[str, Any] | None = None
        self._snapshot_at = -1.0
        self._making: trio.Event | None = None
        # Each snapshot's peers, reduced to what the sparklines draw: (at, slot -> [CPU %,
        # queue, RSS MB]), the last ``history_s`` of them.
        self._history: deque[tuple[float, dict[str, list[float]]]] = deque(
            maxlen=max(1, int(cfg.history_s / max(cfg.refresh_s, 0.1)))
        )

    async def snapshot(self) -> dict[str, Any]:
        """The system as every open page sees it: made at most once per ``refresh_s``."""
        fresh = trio.current_time() - self._snapshot_at < self.refresh_s * 0.9
        if self._snapshot is not None and fresh:
            return self._snapshot
        if self._making is not None:
            await self._making.wait()
            if self._snapshot is not None:
                return self._snapshot
        self._making = making = trio.Event()
        try:
            peers, runs = await status.gather(self.peer)
            snap = status.status_json(m.StatusReply(0, peers, runs))
            snap.update(peer=self.peer.name, at=time.time())
            snap["adapt"] = decisions(snap)
            self._snapshot, self._snapshot_at = snap, trio.current_time()
            self._history.append(
                (
                    snap["at"],
                    {p["slot"]: [p["cpu_percent"], p["queue"], p["rss_mb"]] for p in snap["peers"]},
                )
            )
            return snap
        finally:
            making.set()
            if self._making is making:
                self._making = None

    async def snapshot_for(self, reader: Reader) -> dict[str, Any]:
        """The snapshot as ``reader`` may see it: the arguments of runs that are not its own
        emptied unless it may operate (node/permissions.py ``sees_arguments``)."""
        snap = await self.snapshot()
        if tls.GRANT_OPERATE in reader.grants:
            return snap
        state = self.peer.state
        runs = [
            r
            if permissions.sees_arguments(state, reader.name, reader.grants, r["run_id"])
            else dict(r, argv=[])
            for r in snap["runs"]
        ]
        return dict(snap, runs=runs)

    def history(self) -> dict[str, Any]:
        """Each peer's CPU %, queue and RSS MB over the last ``history_s``: the times, and
        per slot a list of [cpu, queue, rss] per time (None where it was not in a snapshot)."""
        times = [at for at, _ in self._history]
        slots = sorted({slot for _, peers in self._history for slot in peers})
        return {
            "at": times,
            "peers": {slot: [peers.get(slot) for _, peers in self._history] for slot in slots},
        }

    async def stream(self, reader: Reader) -> dict[str, Any]:
        """The task stream of the main page: the last ``stream_s`` seconds of every running
        run the reader may read (and of the newest few that ended), from every peer's trace
        (jobs by spawnable, steals, recovery events), each event with its run."""
        snap = await self.snapshot()
        now = time.time()
        since = now - self.cfg.stream_s
        state = self.peer.state
        events: list[dict[str, Any]] = []
        # The running runs, and the newest few that ended (their last jobs may be in the
        # window): a run ending does not empty the picture.
        running = [r["run_id"] for r in snap["runs"] if r["state"] == "running"]
        ended = sorted(
            (r["run_id"] for r in snap["runs"] if r["state"] in ("done", "failed", "cancelled")),
            reverse=True,
        )[:STREAM_ENDED]
        for run_id in running + ended:
            if permissions.about_run(state, reader.name, reader.grants, run_id, "read"):
                continue
            for name, evs, _ in await self._traces(run_id):
                events += [_event(name, e, run_id) for e in evs if e.at + max(e.dur, 0.0) >= since]
        newest = self._newest(events)
        # From the first event shown, when the runs are younger than the window: a run of
        # seconds fills the picture rather than its last edge.
        start = max(since, newest[0]["at"] - 0.2) if newest else since
        return {"from": start, "to": now, "events": newest}

    def _newest(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        events.sort(key=lambda e: e["at"])
        return events[-self.cfg.stream_events :]

    async def runs_history(self, reader: Reader) -> list[dict[str, Any]]:
        """The newest runs of the run history (it outlives restarts), as the reader may see
        them: the arguments of runs not its own emptied without the operate grant."""
        records, _ = await recorder.gather(self.peer, m.HistoryRequest(0, limit=20))
        state = self.peer.state
        out = []
        for r in records:
            row = {k: v for k, v in vars(r).items() if k not in ("log", "log_times", "stats")}
            if not permissions.sees_arguments(state, reader.name, reader.grants, r.run_id):
                row["argv"] = []
            out.append(row)
        return out

    async def run_page(self, run_id: str) -> dict[str, Any]:
        """A run: its line (live), its history record, its log, its recovery events;
        ``found`` False (and everything empty) for a run no one knows."""
        snap = await self.snapshot()
        line = next((r for r in snap["runs"] if r["run_id"] == run_id), None)
        records, _ = await recorder.gather(self.peer, m.HistoryRequest(0, run_id))
        record = next((vars(r) for r in records if r.run_id == run_id), None)
        log_lines = await self._log(run_id)
        if not log_lines and record is not None:
            log_lines = list(zip(record["log_times"], record["log"], strict=False))
        peers = await self._traces(run_id)
        recovery = sorted(
            ((e, name) for name, evs, _ in peers for e in evs if e.cat == "recovery"),
            key=lambda pair: pair[0].at,
        )
        events = [
            {"peer": name, "at": e.at, "name": e.name, "detail": e.detail} for e, name in recovery
        ]
        every = [e for _, evs, _ in peers for e in evs]
        # A run no peer has a trace event of (unknown, or long gone): no span, not min([]).
        span = (
            [min(e.at for e in every), max(e.at + max(e.dur, 0.0) for e in every)] if every else []
        )
        stream = self._newest([_event(name, e, run_id) for name, evs, _ in peers for e in evs])
        return {
            "run_id": run_id,
            "line": line,
            "record": record,
            "result": await self._result(run_id),
            "log": [{"at": at, "line": text} for at, text in log_lines],
            "events": events,
            "span": span,
            "stream": stream,
            "found": line is not None or record is not None,
        }

    async def _result(self, run_id: str) -> dict[str, Any] | None:
        """A finished run's outcome as its page shows it: what the plugin's report made of
        the value (else the value), cut at ``RESULT_CHARS``; or the error with its remote
        traceback; and the check. None while it runs, or when no member keeps it."""
        if self.peer.state.runs.status_of(run_id) in ("running", "queued"):
            return None
        result, _ = await fetch_result(self.peer, run_id, False)
        if result is None:
            return None
        shown: dict[str, Any] = {"check": result.check, "peers": result.peers}
        if result.error is not None:
            e = result.error
            shown["error"] = {"type": e.type, "message": e.message, "traceback": e.traceback}
        else:
            shown["value"] = _shown_value(
                result.report if result.report is not None else result.value
            )
        return shown

    async def _log(self, run_id: str) -> list[tuple[float, str]]:
        peer = self.peer
        owner = peer.state.runs.master_of(run_id, peer.name)
        if owner is None or owner == peer.name:
            return peer.logs.since(run_id, 0)[0]
        reply = await ask(
            peer,
            owner,
            lambda req: m.LogsRequest(req, run_id, 0),
            m.LogsReply,
            peer.cfg.client.timeout_s,
        )
        return list(zip(reply.times, reply.lines, strict=False)) if reply is not None else []

    async def _traces(self, run_id: str) -> list[tuple[str, list[m.TraceEvent], int]]:
        peer = self.peer
        peer.traces.flush()
        own = peer.traces.get(run_id)
        found = [(peer.name, list(own.events) if own else [], own.dropped if own else 0)]
        answers = await ask_all(
            peer,
            lambda req: m.TraceRequest(req, run_id, ""),
            m.TraceReply,
            peer.cfg.run.stats_timeout_s,
        )
        found += [(r.peer, list(r.events), r.dropped) for _, r in answers if r.events]
        return found

    async def trace(self, run_id: str) -> dict[str, Any]:
        return trace.chrome_trace(await self._traces(run_id), run_id)


# count. Runs that ended whose last events the main page's stream shows beside the running.
STREAM_ENDED = 4
# characters. A result's text on its page, at most (the rest: `satind result`).
RESULT_CHARS = 2000


def _shown_value(data: bytes | None) -> str:
    """A result's text: its repr, cut; a value of a type this peer cannot decode is said to
    be so, not shown as bytes."""
    if data is None:
        return "None"
    try:
        text = repr(codec.decode_value(data))
    except Exception as exc:
        return f"(a value this peer cannot show: {exc})"
    return text if len(text) <= RESULT_CHARS else text[:RESULT_CHARS] + " …"


def _event(peer: str, e: m.TraceEvent, run_id: str) -> dict[str, Any]:
    return {
        "peer": peer.split("#")[0],
        "run": run_id,
        "track": e.track,
        "cat": e.cat,
        "name": e.name,
        "at": e.at,
        "dur": e.dur,
        "detail": e.detail,
    }


def decisions(snap: dict[str, Any]) -> list[dict[str, Any]]:
    """The coordinators' last decisions, from every peer's line (each run's coordinator is
    its master), newest last."""
    made = [dict(d, peer=p["slot"]) for p in snap["peers"] for d in p.get("decisions", [])]
    return sorted(made, key=lambda d: d["at"])[-20:]
