"""A web dashboard per peer (``[dashboard]``, off by default; docs/operations.md, "Dashboard").

One page (``dashboard.html``: plain HTML and a small script, no build step, nothing fetched
from elsewhere) shows the peers, the runs, a run's page (its log, statistics, recovery events
on a timeline, its trace to download) and the adaptivity coordinator's decisions. It is live:
the page holds one server-sent-events stream (``/api/events``) on which the peer pushes a
snapshot of the system every ``refresh_s``. The JSON behind it:

- ``GET /api/status``: a snapshot: every member's line and every run's (what `satind status
  --json` prints), this peer's name, the time, the coordinator's decisions;
- ``GET /api/run/RUN_ID``: a run's line, its record in the run history, its log, its
  recovery events;
- ``GET /api/run/RUN_ID/trace.json``: its trace (Chrome trace-event JSON, for ui.perfetto.dev).

A snapshot asks every member (as `satind status` does), so one is made per ``refresh_s`` and
shared by every open page. Who may look: bound to 127.0.0.1 by default; bound elsewhere it
refuses to start unless ``tls`` (the cluster's mutual TLS: a browser presents a certificate of
the cluster's CA) or a ``token`` (``?token=`` once, then a cookie) guards it. A request is a
bounded head (``max_request_bytes`` within ``timeout_s``); at most ``max_connections`` at once.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import time
import urllib.parse
from importlib import resources
from typing import Any

import trio

from satind import trace
from satind.config import DashboardConfig
from satind.net import messages as m
from satind.net.transport import Address
from satind.node import recorder, status
from satind.node.http import REASONS, answer, read_head
from satind.node.recorder import RecorderHost
from satind.node.rpc import ask, ask_all

log = logging.getLogger(__name__)

COOKIE = "satind_dashboard"
JSON = "application/json"


def refusal(cfg: DashboardConfig, has_credentials: bool) -> str:
    """Why the dashboard may not serve as configured ("" when it may)."""
    if cfg.tls and not has_credentials:
        return "[dashboard] tls needs the peer's certificate (a daemon started with --keys)"
    try:
        loopback = ipaddress.ip_address(cfg.host).is_loopback
    except ValueError:
        loopback = cfg.host == "localhost"
    if loopback or cfg.tls or cfg.token:
        return ""
    return (
        f"the dashboard would serve {cfg.host} with neither TLS nor a token: set [dashboard] "
        "tls = true (browsers present a client certificate of the cluster's CA) or a token, "
        "or bind it to 127.0.0.1 and reach it through an SSH tunnel"
    )


def page() -> bytes:
    return resources.files("satind.node").joinpath("dashboard.html").read_bytes()


def parse_request(head: bytes) -> tuple[str, str, dict[str, str], dict[str, str]] | None:
    """(method, path, query, cookies) of a request head; None when it is not HTTP."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
        return None
    method, target = parts[0].decode("latin-1"), parts[1].decode("latin-1")
    url = urllib.parse.urlsplit(target)
    query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
    cookies: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"cookie":
            for item in value.decode("latin-1").split(";"):
                key, _, val = item.strip().partition("=")
                cookies[key] = val
    return method, urllib.parse.unquote(url.path), query, cookies


class DashboardServer:
    """The dashboard of one peer: ``run`` is a service of the peer's nursery."""

    def __init__(self, peer: RecorderHost, cfg: DashboardConfig) -> None:
        self.peer = peer
        self.cfg = cfg
        self.open = 0
        self.address: Address | None = None
        self._snapshot: dict[str, Any] | None = None
        self._snapshot_at = -1.0
        self._making: trio.Event | None = None

    async def run(
        self, *, task_status: trio.TaskStatus[Address | None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        cfg = self.cfg
        credentials = self.peer.options.credentials
        why = refusal(cfg, credentials is not None)
        if why:
            log.error("no dashboard: %s", why)
            task_status.started(None)
            return
        try:
            listeners: list[Any] = await trio.open_tcp_listeners(cfg.port, host=cfg.host)
        except OSError as exc:
            log.error("no dashboard: cannot serve on %s:%s: %s", cfg.host, cfg.port, exc)
            task_status.started(None)
            return
        host, port = listeners[0].socket.getsockname()[:2]
        self.address = Address(host, port)
        scheme = "http"
        if cfg.tls and credentials is not None:
            context = credentials.server_context()
            listeners = [trio.SSLListener(lst, context) for lst in listeners]
            scheme = "https"
        log.info("%s serves its dashboard on %s://%s/", self.peer.name, scheme, self.address)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.serve_listeners, self._serve, listeners)
            task_status.started(self.address)

    async def _serve(self, stream: trio.abc.Stream) -> None:
        async with stream:
            if self.open >= self.cfg.max_connections:
                return
            self.open += 1
            try:
                await self._one(stream)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass  # the browser went away (or failed the TLS handshake)
            finally:
                self.open -= 1

    async def _one(self, stream: trio.abc.Stream) -> None:
        head = None
        with trio.move_on_after(self.cfg.timeout_s):
            head = await read_head(stream, self.cfg.max_request_bytes)
        if head is None:
            return
        request = parse_request(head)
        if request is None:
            await self._send(stream, 400, "text/plain", b"Bad Request\n")
            return
        method, path, query, cookies = request
        headers: list[tuple[str, str]] = [("Cache-Control", "no-store")]
        if self.cfg.token:
            given = query.get("token") or cookies.get(COOKIE, "")
            if not hmac.compare_digest(given.encode(), self.cfg.token.encode()):
                body = b"this dashboard needs its token: open it once as /?token=TOKEN\n"
                await self._send(stream, 401, "text/plain; charset=utf-8", body)
                return
            if "token" in query:
                cookie = f"{COOKIE}={self.cfg.token}; HttpOnly; SameSite=Strict; Path=/"
                headers.append(("Set-Cookie", cookie))
        if method not in ("GET", "HEAD"):
            await self._send(stream, 404, "text/plain", b"Not Found\n")
            return
        if path == "/api/events":
            await self._events(stream, headers)
            return
        status_code, content_type, body = await self._route(path, headers)
        await self._send(stream, status_code, content_type, body, method == "HEAD", headers)

    async def _send(
        self,
        stream: trio.abc.Stream,
        code: int,
        content_type: str,
        body: bytes,
        head_only: bool = False,
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        with trio.move_on_after(self.cfg.timeout_s):
            await stream.send_all(answer(code, content_type, body, head_only, headers or ()))

    async def _route(self, path: str, headers: list[tuple[str, str]]) -> tuple[int, str, bytes]:
        if path in ("/", "/index.html"):
            return 200, "text/html; charset=utf-8", page()
        if path == "/api/status":
            return 200, JSON, json.dumps(await self.snapshot()).encode()
        parts = path.strip("/").split("/")
        if len(parts) >= 3 and parts[:2] == ["api", "run"] and len(parts[2]) <= 100:
            run_id = parts[2]
            if len(parts) == 3:
                return 200, JSON, json.dumps(await self.run_page(run_id)).encode()
            if parts[3:] == ["trace.json"]:
                name = f"satind-trace-{run_id}.json"
                headers.append(("Content-Disposition", f'attachment; filename="{name}"'))
                return 200, JSON, json.dumps(await self.trace(run_id)).encode()
        return 404, "text/plain; charset=utf-8", f"{REASONS[404]}: {path}\n".encode()

    async def _events(self, stream: trio.abc.Stream, headers: list[tuple[str, str]]) -> None:
        """Server-sent events: a snapshot now and every ``refresh_s``, until the page goes."""
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers)
        await stream.send_all(
            (
                "HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n"
                f"{extra}Connection: close\r\n\r\n"
            ).encode("latin-1")
        )
        while True:
            data = json.dumps(await self.snapshot())
            with trio.fail_after(self.cfg.timeout_s):  # a reader that stalls is dropped
                await stream.send_all(f"data: {data}\n\n".encode())
            await trio.sleep(self.cfg.refresh_s)

    # -- what the page shows ---------------------------------------------------------------

    async def snapshot(self) -> dict[str, Any]:
        """The system as every open page sees it: made at most once per ``refresh_s``."""
        fresh = trio.current_time() - self._snapshot_at < self.cfg.refresh_s * 0.9
        if self._snapshot is not None and fresh:
            return self._snapshot
        if self._making is not None:
            await self._making.wait()
            if self._snapshot is not None:
                return self._snapshot
        self._making = trio.Event()
        try:
            peers, runs = await status.gather(self.peer)
            snap = status.status_json(m.StatusReply(0, peers, runs))
            snap.update(peer=self.peer.name, at=time.time())
            snap["adapt"] = self._decisions(snap)
            self._snapshot, self._snapshot_at = snap, trio.current_time()
            return snap
        finally:
            self._making.set()
            self._making = None

    @staticmethod
    def _decisions(snap: dict[str, Any]) -> list[dict[str, Any]]:
        """The coordinators' last decisions, from every peer's line (each run's coordinator
        is its master), newest last."""
        made = [dict(d, peer=p["slot"]) for p in snap["peers"] for d in p.get("decisions", [])]
        return sorted(made, key=lambda d: d["at"])[-20:]

    async def run_page(self, run_id: str) -> dict[str, Any]:
        """A run: its line (live), its history record, its log, its recovery events."""
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
        starts = [e.at for _, evs, _ in peers for e in evs]
        span = [min(starts), max(e.at + max(e.dur, 0.0) for _, evs, _ in peers for e in evs)]
        return {
            "run_id": run_id,
            "line": line,
            "record": record,
            "log": [{"at": at, "line": line} for at, line in log_lines],
            "events": events,
            "span": span if starts else [],
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
