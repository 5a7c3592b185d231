"""A web dashboard per peer (``[dashboard]``, off by default; docs/operations.md, "Dashboard").

One page (``dashboard.html``: plain HTML, a small script and a style sheet in it, no build
step, nothing fetched from elsewhere) shows the peers, the runs, a run's page (its log,
statistics, recovery events on a timeline, its trace to download) and the adaptivity
coordinator's decisions. It is live: the page holds one server-sent-events stream
(``/api/events``) on which the peer pushes a snapshot of the system every ``refresh_s``. The
JSON behind it (node/dashboard_views.py):

- ``GET /api/status``: a snapshot: every member's line and every run's (what `satind status
  --json` prints), this peer's name, the time, the coordinator's decisions;
- ``GET /api/run/RUN_ID``: a run's line, its record in the run history, its log, its
  recovery events (404 with ``found`` false for a run no one knows);
- ``GET /api/run/RUN_ID/trace.json``: its trace (Chrome trace-event JSON, for ui.perfetto.dev).

Who may look: bound to 127.0.0.1 by default; bound elsewhere it refuses to start unless
``tls`` (the cluster's mutual TLS: a browser presents a certificate of the cluster's CA) or a
``token`` guards it. The token is given once as ``?token=``: the answer is a redirect to the
same address without it (out of the address bar and the history) that sets a cookie derived
from the token (``session_value``), never the token itself; scripts may send it as
``Authorization: Bearer TOKEN`` instead. Over TLS, what a certificate may read is what it may
read through the control plane (node/permissions.py): the status for a certificate with the
submit or operate grant, the arguments of its own runs only and the pages, logs and traces
of its own runs only unless it may operate. The connections and their bounds are
node/http.py's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import logging
import re
import urllib.parse
from importlib import resources
from typing import Any

import trio

from satind.config import DashboardConfig
from satind.net.transport import Address
from satind.node import permissions
from satind.node.dashboard_views import Reader, Views, reader_of
from satind.node.http import TEXT, Endpoint, Exchange, Request, parse_request
from satind.node.recorder import RecorderHost

log = logging.getLogger(__name__)

COOKIE = "satind_dashboard"
JSON = "application/json"
# What run ids are made of (node/host.py ``new_run_id``: 20260101-120000-3f2a9c; the
# simulator's sim-1-2): an id of anything else is no run's, and is never echoed anywhere.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


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


def content_policy(html: bytes) -> str:
    """The page's Content-Security-Policy: its own origin only, and of inline code only its
    one script and its one style sheet, by their SHA-256 (no 'unsafe-inline': a string that
    reached the page as markup could not run). Not framed by anyone.

    Raises:
        ValueError: the page has not exactly one ``<script>`` and one ``<style>``.
    """

    def digest(tag: str) -> str:
        (body,) = re.findall(rf"<{tag}>(.*?)</{tag}>".encode(), html, re.DOTALL)
        return "'sha256-" + base64.b64encode(hashlib.sha256(body).digest()).decode() + "'"

    return (
        f"default-src 'self'; script-src {digest('script')}; style-src {digest('style')}; "
        "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )


def session_value(token: str) -> str:
    """The cookie a browser gets for the token: an HMAC of a fixed label under the token. It
    proves the token was given, and is not the token: a cookie that leaks (a profile copied,
    a proxy's log) does not give away the secret the operator hands out and puts in
    configuration files."""
    return hmac.new(token.encode(), b"satind-dashboard-session", hashlib.sha256).hexdigest()


def host_allowed(header: str, cfg: DashboardConfig) -> bool:
    """Whether a request's ``Host`` may reach this dashboard: none (an HTTP/1.0 client), an IP
    address, ``localhost``, the bound host, or one of ``[dashboard] allowed_hosts``; never a
    name a web page rebound to this machine's address (DNS rebinding)."""
    if not header:
        return True
    host = header.strip().lower()
    if host.startswith("["):  # [IPv6]:port
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    try:
        ipaddress.ip_address(host)
    except ValueError:
        allowed = {"localhost", cfg.host.lower(), *(h.lower() for h in cfg.allowed_hosts)}
        return host in allowed
    return True


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode())


def without_token(request: Request) -> str:
    """The request's address without ``token`` in its query: where the redirect goes."""
    rest = [(k, v) for k, v in request.query.items() if k != "token"]
    where = urllib.parse.quote(request.path, safe="/")
    return where + ("?" + urllib.parse.urlencode(rest) if rest else "")


class DashboardServer:
    """The dashboard of one peer: ``run`` is a service of the peer's nursery."""

    def __init__(self, peer: RecorderHost, cfg: DashboardConfig) -> None:
        self.peer = peer
        self.cfg = cfg
        self.views = Views(peer, cfg)
        self.page = page()
        self.endpoint = Endpoint("dashboard", cfg, self.handle, content_policy(self.page))
        self.address: Address | None = None
        self.tls = False

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
            scheme, self.tls = "https", True
        log.info("%s serves its dashboard on %s://%s/", self.peer.name, scheme, self.address)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.endpoint.serve, listeners)
            task_status.started(self.address)

    async def handle(self, head: bytes, ex: Exchange) -> None:
        """One request: checked (method, token), then routed as its reader may read."""
        request = parse_request(head)
        if request is None:
            await ex.answer(400, TEXT, b"Bad Request\n")
            return
        if request.method not in ("GET", "HEAD"):
            body = b"Method Not Allowed: the dashboard answers GET and HEAD\n"
            await ex.answer(405, TEXT, body, headers=[("Allow", "GET, HEAD")])
            return
        head_only = request.method == "HEAD"
        if not host_allowed(request.headers.get("host", ""), self.cfg):
            body = (
                b"this dashboard answers requests for its IP address, localhost or a host in "
                b"[dashboard] allowed_hosts\n"
            )
            await ex.answer(403, TEXT, body, head_only)
            return
        headers = [("Cache-Control", "no-store")]
        if self.cfg.token and not await self._token(request, ex, head_only, headers):
            return
        reader = reader_of(ex.peer_certificate())
        if request.path == "/api/events":
            await self._events(ex, reader, head_only, headers)
            return
        code, content_type, body = await self._route(request.path, reader, headers)
        await ex.answer(code, content_type, body, head_only, headers)

    async def _token(
        self, request: Request, ex: Exchange, head_only: bool, headers: list[tuple[str, str]]
    ) -> bool:
        """Whether the request may go on: it brings the session cookie or the token in an
        Authorization header. ``?token=`` is answered here: a redirect to the same address
        without it, with the cookie (when right), else 401."""
        token = self.cfg.token
        session = session_value(token)
        if "token" in request.query:
            if not _same(request.query["token"], token):
                await self._unauthorized(ex, head_only)
                return False
            cookie = f"{COOKIE}={session}; HttpOnly; SameSite=Strict; Path=/"
            if self.tls:
                cookie += "; Secure"
            moved = [*headers, ("Location", without_token(request)), ("Set-Cookie", cookie)]
            await ex.answer(303, TEXT, b"See Other\n", head_only, moved)
            return False
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and _same(given.strip(), token):
            return True
        if _same(request.cookies.get(COOKIE, ""), session):
            return True
        await self._unauthorized(ex, head_only)
        return False

    @staticmethod
    async def _unauthorized(ex: Exchange, head_only: bool) -> None:
        body = b"this dashboard needs its token: open it once as /?token=TOKEN\n"
        await ex.answer(401, TEXT, body, head_only)

    async def _route(
        self, path: str, reader: Reader, headers: list[tuple[str, str]]
    ) -> tuple[int, str, bytes]:
        if path in ("/", "/index.html"):
            return 200, "text/html; charset=utf-8", self.page
        if path == "/api/status":
            why = permissions.status_refusal(reader.name, reader.grants)
            if why:
                return 403, TEXT, f"{why}\n".encode()
            return 200, JSON, _json(await self.views.snapshot_for(reader))
        if path in ("/api/stream", "/api/history", "/api/runs"):
            why = permissions.status_refusal(reader.name, reader.grants)
            if why:
                return 403, TEXT, f"{why}\n".encode()
            if path == "/api/stream":
                return 200, JSON, _json(await self.views.stream(reader))
            if path == "/api/history":
                return 200, JSON, _json(self.views.history())
            return 200, JSON, _json(await self.views.runs_history(reader))
        parts = path.split("/")
        if len(parts) in (4, 5) and parts[:3] == ["", "api", "run"]:
            run_id = parts[3]
            if not RUN_ID.fullmatch(run_id):
                return 404, TEXT, b"Not Found: that is no run id\n"
            why = permissions.about_run(self.peer.state, reader.name, reader.grants, run_id, "read")
            if why:
                return 403, TEXT, f"{why}\n".encode()
            if len(parts) == 4:
                run = await self.views.run_page(run_id)
                return (200 if run["found"] else 404), JSON, _json(run)
            if parts[4] == "trace.json":
                name = f"satind-trace-{run_id}.json"
                headers.append(("Content-Disposition", f'attachment; filename="{name}"'))
                return 200, JSON, _json(await self.views.trace(run_id))
        return 404, TEXT, b"Not Found\n"

    async def _events(
        self, ex: Exchange, reader: Reader, head_only: bool, headers: list[tuple[str, str]]
    ) -> None:
        """Server-sent events: a snapshot now and every ``refresh_s``, until the page goes.
        A page that stops reading is dropped when a snapshot is not taken within
        ``timeout_s`` (trio.TooSlowError from ``Exchange.send``, node/http.py)."""
        why = permissions.status_refusal(reader.name, reader.grants)
        if why:
            await ex.answer(403, TEXT, f"{why}\n".encode(), head_only, headers)
            return
        await ex.start_stream("text/event-stream", headers)
        if head_only:
            return
        while True:
            data = json.dumps(await self.views.snapshot_for(reader))
            await ex.send(f"data: {data}\n\n".encode())
            await trio.sleep(self.cfg.refresh_s)


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()
