"""What the dashboard's page shows (node/dashboard.py serves it): the system's snapshot, a
run's page and its trace, as JSON, each read as the browser's certificate may read it.

A snapshot asks every member (as `satind status` does), so one is made per ``refresh_s`` and
shared by every open page; what a reader may not see of it (the arguments of other clients'
runs, for a certificate without the operate grant: node/permissions.py) is taken out of a
copy for that reader.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import trio

from satind import trace
from satind.net import messages as m
from satind.net import tls
from satind.node import permissions, recorder, status
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

    def __init__(self, peer: RecorderHost, refresh_s: float) -> None:
        self.peer = peer
        self.refresh_s = refresh_s
        self._snapshot: dict[str, Any] | None = None
        self._snapshot_at = -1.0
        self._making: trio.Event | None = None

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
        return {
            "run_id": run_id,
            "line": line,
            "record": record,
            "log": [{"at": at, "line": text} for at, text in log_lines],
            "events": events,
            "span": span,
            "found": line is not None or record is not None,
        }

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


def decisions(snap: dict[str, Any]) -> list[dict[str, Any]]:
    """The coordinators' last decisions, from every peer's line (each run's coordinator is
    its master), newest last."""
    made = [dict(d, peer=p["slot"]) for p in snap["peers"] for d in p.get("decisions", [])]
    return sorted(made, key=lambda d: d["at"])[-20:]
