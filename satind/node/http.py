"""The little of HTTP/1.0 that a peer's endpoints need (node/metrics.py, node/dashboard.py),
and what keeps a request from reaching past its own connection.

A peer serves a few local readers (a scraper, a browser), so a minimal responder on trio, in
the peer's own thread, beats a web framework in a thread of its own that would read the
peer's state while the trio thread changes it. The price is that the endpoint's tasks run in
the peer's nursery: an exception that leaves a connection's task ends the peer. So
``Endpoint`` owns every connection and promises that none ends anything but itself:

- a handler that raises gets a 500 answer (when nothing was sent yet) and a WARNING with the
  traceback in the log; a client that goes away, stalls (``trio.TooSlowError``) or breaks the
  TLS handshake costs its connection only;
- each connection has its own deadline for its request head (``head_timeout_s``, the TLS
  handshake included), and every answer one for being taken (``timeout_s``);
- at most ``max_connections`` at once: past it a new connection closes the oldest one that
  has not sent its head yet (a client that connects and sends nothing cannot starve a
  browser), else it is closed itself;
- every answer carries headers that keep it from being framed, sniffed or referred
  (``SECURITY_HEADERS``), and no header value with a line break goes out (``answer``).
"""

from __future__ import annotations

import contextlib
import logging
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from satind.net.handshake import forget_tls

log = logging.getLogger(__name__)

REASONS = {
    200: "OK",
    303: "See Other",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
# On every answer: never framed (clickjacking), never content-sniffed into something else,
# never sending this URL (a token, a run id) to another site as the referrer.
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
)
# The policy of an answer that is no page (the dashboard gives its page's own).
NO_CONTENT_POLICY = "default-src 'none'; frame-ancestors 'none'"
TEXT = "text/plain; charset=utf-8"


class Limits(Protocol):
    """What bounds an endpoint (``MetricsConfig``, ``DashboardConfig``)."""

    @property
    def max_connections(self) -> int: ...
    @property
    def max_request_bytes(self) -> int: ...
    @property
    def head_timeout_s(self) -> float: ...
    @property
    def timeout_s(self) -> float: ...


def _checked(name: str, value: str) -> str:
    """One header line. Raises ValueError for a line break or a control character in it
    (a value from a request must never start a header of its own) or a character latin-1
    has not."""
    line = f"{name}: {value}\r\n"
    if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in name + value):
        raise ValueError(f"refusing a {name} header with a control character")
    line.encode("latin-1")  # UnicodeEncodeError is a ValueError
    return line


def head(
    status: int,
    content_type: str,
    length: int | None,
    headers: Sequence[tuple[str, str]] = (),
    policy: str = NO_CONTENT_POLICY,
) -> bytes:
    """The head of an HTTP/1.0 answer (``length`` None: a body until the connection closes).

    Raises:
        ValueError: a header value has a control character or is not latin-1.
    """
    lines = [_checked("Content-Type", content_type)]
    if length is not None:
        lines.append(f"Content-Length: {length}\r\n")
    lines += [_checked(n, v) for n, v in (*SECURITY_HEADERS, ("Content-Security-Policy", policy))]
    lines += [_checked(name, value) for name, value in headers]
    text = f"HTTP/1.0 {status} {REASONS[status]}\r\n{''.join(lines)}Connection: close\r\n\r\n"
    return text.encode("latin-1")


def answer(
    status: int,
    content_type: str,
    body: bytes,
    head_only: bool = False,
    headers: Sequence[tuple[str, str]] = (),
    policy: str = NO_CONTENT_POLICY,
) -> bytes:
    """A whole HTTP/1.0 answer (the head alone for a HEAD request).

    Raises:
        ValueError: a header value has a control character or is not latin-1.
    """
    top = head(status, content_type, len(body), headers, policy)
    return top if head_only else top + body


async def read_head(stream: trio.abc.ReceiveStream, limit: int) -> bytes | None:
    """The request head up to the blank line; None if the client closes first or sends
    ``limit`` bytes without one. Holds at most ``limit`` + 4 bytes."""
    data = bytearray()
    while (end := data.find(b"\r\n\r\n")) < 0:
        if len(data) >= limit + 4:
            return None
        chunk = await stream.receive_some(limit + 4 - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data[:end]) if end <= limit else None


@dataclass(frozen=True)
class Request:
    """A request head, read: the path percent-decoded once, as UTF-8."""

    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    # Lower-case names; the last of a name wins.
    headers: dict[str, str] = field(default_factory=dict)
    cookies: dict[str, str] = field(default_factory=dict)


def parse_request(head: bytes) -> Request | None:
    """A request head read (method, path, query, headers, cookies); None when it is not an
    HTTP request a peer serves: no ``METHOD /PATH HTTP/x`` line, a path that is not UTF-8
    once percent-decoded, or one with a control character (a NUL, a line break) in it."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/") or not parts[1].startswith(b"/"):
        return None
    method, target = parts[0].decode("latin-1"), parts[1].decode("latin-1")
    url = urllib.parse.urlsplit(target)
    try:
        path = urllib.parse.unquote(url.path, errors="strict")
    except UnicodeDecodeError:
        return None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        return None
    query = {k: v[0] for k, v in urllib.parse.parse_qs(url.query).items()}
    headers: dict[str, str] = {}
    cookies: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        key, text = name.strip().lower().decode("latin-1"), value.strip().decode("latin-1")
        headers[key] = text
        if key == "cookie":
            for item in text.split(";"):
                ck, _, cv = item.strip().partition("=")
                cookies[ck] = cv
    return Request(method, path, query, headers, cookies)


class Exchange:
    """The answering side of one connection, for a handler: one whole answer, or a stream
    (a head, then parts); every send bounded by ``timeout_s``."""

    def __init__(self, stream: trio.abc.Stream, timeout_s: float, policy: str) -> None:
        self.stream = stream
        self.timeout_s = timeout_s
        self.policy = policy
        self.started = False

    @property
    def tls(self) -> bool:
        return isinstance(self.stream, trio.SSLStream)

    def peer_certificate(self) -> dict[str, Any] | None:
        """The client's verified certificate (``SSLObject.getpeercert()``), None without TLS."""
        if not isinstance(self.stream, trio.SSLStream):
            return None
        cert: dict[str, Any] | None = self.stream.getpeercert()
        return cert

    async def answer(
        self,
        status: int,
        content_type: str,
        body: bytes,
        head_only: bool = False,
        headers: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Send a whole answer (raises trio.TooSlowError if it is not taken in time)."""
        data = answer(status, content_type, body, head_only, headers, self.policy)
        self.started = True
        await self.send(data)

    async def start_stream(self, content_type: str, headers: Sequence[tuple[str, str]]) -> None:
        """Send the head of an answer whose body follows in parts (server-sent events)."""
        data = head(200, content_type, None, headers, self.policy)
        self.started = True
        await self.send(data)

    async def send(self, data: bytes) -> None:
        with trio.fail_after(self.timeout_s):
            await self.stream.send_all(data)


Handler = Callable[[bytes, Exchange], Awaitable[None]]
# What ends a connection and nothing else, said at DEBUG: the client went away, broke the
# TLS handshake, or stopped reading.
GONE = (trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError, OSError)


class Endpoint:
    """The connections of one HTTP endpoint of a peer, each a task of ``serve``'s nursery,
    none of which can end anything but itself."""

    def __init__(self, what: str, limits: Limits, handler: Handler, policy: str = "") -> None:
        self.what = what
        self.limits = limits
        self.handler = handler
        self.policy = policy or NO_CONTENT_POLICY
        self.open = 0
        # The connections still waiting for their request head, oldest first (dicts keep
        # their order): the first to close when one more comes past the limit.
        self._waiting: dict[int, trio.CancelScope] = {}
        self._count = 0

    async def serve(self, listeners: Sequence[trio.abc.Listener[Any]]) -> None:
        await trio.serve_listeners(self.connection, list(listeners))

    async def connection(self, stream: trio.abc.Stream) -> None:
        """One connection, from its accept to its close; raises nothing but Cancelled."""
        if self.open >= self.limits.max_connections:
            if not self._waiting:
                await trio.aclose_forcefully(stream)  # every slot is being answered
                return
            oldest = next(iter(self._waiting))
            self._waiting.pop(oldest).cancel()
        self.open += 1
        self._count += 1
        key = self._count
        answered = False
        try:
            answered = await self._one(key, stream)
        finally:
            self._waiting.pop(key, None)
            self.open -= 1
            await self._close(stream, answered)

    async def _one(self, key: int, stream: trio.abc.Stream) -> bool:
        """Read the head, let the handler answer; True once it did without a hitch."""
        exchange = Exchange(stream, self.limits.timeout_s, self.policy)
        try:
            head = None
            deadline = trio.current_time() + self.limits.head_timeout_s
            with trio.CancelScope(deadline=deadline) as waiting:
                self._waiting[key] = waiting
                if isinstance(stream, trio.SSLStream):
                    await stream.do_handshake()
                head = await read_head(stream, self.limits.max_request_bytes)
            self._waiting.pop(key, None)
            if head is None:
                return False  # too long, too slow, closed, or closed for a newer connection
            await self.handler(head, exchange)
            return True
        except GONE as exc:
            log.debug("%s: a connection ended: %r", self.what, exc)
        except Exception:
            # A handler's bug costs this request only; the peer goes on.
            log.warning("%s: a request failed; answering 500", self.what, exc_info=True)
            if not exchange.started:
                with contextlib.suppress(*GONE, ValueError):
                    body = b"Internal Server Error: the peer's log says why\n"
                    await exchange.answer(500, TEXT, body)
                    return True
        return False

    async def _close(self, stream: trio.abc.Stream, answered: bool) -> None:
        """Close: after an answer, gracefully within ``timeout_s`` (over plain TCP, end our
        side and read what the client still sends, a body we did not want, until it closes:
        else our answer may be lost to a reset); else, or past the deadline, at once."""
        if answered:
            with trio.move_on_after(self.limits.timeout_s), contextlib.suppress(*GONE):
                if isinstance(stream, trio.SocketStream):
                    await stream.send_eof()
                    budget = 1 << 16
                    while budget > 0 and (chunk := await stream.receive_some(budget)):
                        budget -= len(chunk)
                await stream.aclose()
        await trio.aclose_forcefully(stream)
        if isinstance(stream, trio.SSLStream):
            forget_tls(stream)
