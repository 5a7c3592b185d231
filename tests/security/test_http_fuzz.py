"""The HTTP surface of a real peer (its dashboard and its metrics endpoint, node/http.py), fuzzed
as the wire is (test_malformed_frames.py): Hypothesis-made request lines, paths and
percent-encodings, methods, headers and bodies; clients that send slowly, stop reading an
event stream, close half or reset. After each, the peer (its thread, the endpoints' serving
tasks) is still there and answers a normal request. Then each defect of issue 45 that ended
a peer with one request, one test each."""

from __future__ import annotations

import dataclasses
import errno
import re
import socket
import sqlite3
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from satind import config
from satind.config import DashboardConfig, MetricsConfig
from satind.net import codec
from satind.net import messages as m
from satind.node.dashboard import COOKIE, session_value
from satind.node.history import Entry, HistoryStore
from tests.security.live import LivePeer, make_keys, peer_in_thread, read_frames, tls_client

TOKEN = "fuzz-t0ken"
BEARER = f"Authorization: Bearer {TOKEN}\r\n".encode()
# An id of the shape peers make that no run has.
UNKNOWN = "20260101-000000-abcdef"
DAMAGED = "20260101-000001-d4m4g3"
ANSWERED = {200, 303, 400, 401, 403, 404, 405}


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LivePeer]:
    """A peer with its dashboard (a token), its metrics and a run history; short deadlines so
    that slow and stalled clients are dropped within a test."""
    keys = make_keys(tmp_path_factory.mktemp("keys"))
    dashboard = DashboardConfig(
        enabled=True, port=0, token=TOKEN, refresh_s=0.1, head_timeout_s=1.0, timeout_s=1.0
    )
    cfg = dataclasses.replace(
        config.DEFAULT,
        dashboard=dashboard,
        metrics=MetricsConfig(enabled=True, port=0, head_timeout_s=1.0, timeout_s=1.0),
        history=dataclasses.replace(
            config.DEFAULT.history, enabled=True, path=str(keys / "history.sqlite")
        ),
    )
    with peer_in_thread(cfg, keys) as peer:
        yield peer


def port_of(web: LivePeer, which: str) -> int:
    server = web.peer.dashboard if which == "dashboard" else web.peer.metrics
    assert server is not None and server.address is not None
    return server.address.port


def send(port: int, data: bytes, shut: bool = False, limit: float = 10.0) -> bytes:
    """Send ``data``, read the answer's head (or all of it, up to 1 MB, if it ends); b"" if
    the peer closed without one."""
    out = b""
    deadline = time.monotonic() + limit
    with socket.create_connection(("127.0.0.1", port), timeout=limit) as sock:
        try:
            sock.sendall(data)
            if shut:
                sock.shutdown(socket.SHUT_WR)
            while len(out) < 1 << 20 and time.monotonic() < deadline:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                out += chunk
                if b"text/event-stream" in out and b"\r\n\r\n" in out:
                    break  # a live stream: its head is the answer
        except (ConnectionResetError, BrokenPipeError):
            pass  # closed with our bytes unread
        except OSError as exc:
            # The peer closed (and reset) before our half-close: ENOTCONN from shutdown(),
            # seen under a loaded suite with an 8 KiB header the peer refused at once.
            if exc.errno != errno.ENOTCONN:
                raise
    return out


def status_of(answer: bytes) -> int:
    found = re.match(rb"HTTP/1\.0 (\d{3}) ", answer)
    assert found, answer[:200]
    return int(found.group(1))


def headers_of(answer: bytes) -> dict[str, str]:
    head = answer.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")[1:]
    return {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in head)}


def get(web: LivePeer, path: str, extra: bytes = BEARER, which: str = "dashboard") -> bytes:
    return send(port_of(web, which), f"GET {path} HTTP/1.0\r\n".encode() + extra + b"\r\n")


def still_serves(web: LivePeer) -> None:
    """The peer's thread runs and both endpoints answer a normal request."""
    assert web.thread.is_alive() and not web.peer.stopped.is_set()
    assert status_of(get(web, "/api/status")) == 200
    assert status_of(get(web, "/metrics", b"", "metrics")) == 200


# -- the fuzz ---------------------------------------------------------------------------

pieces = st.sampled_from(
    [
        "api", "run", "status", "events", "trace.json", "index.html", "metrics", "", ".",
        "..", "%2e", "%2E%2e", "%252e..", "%C4%80", "%FF%FE", "%", "%G1", "%0d%0a", "%00",
        "%2F", "%E2%80%AE", "%ED%A0%80", UNKNOWN, DAMAGED, "a" * 101, "x y", "?",
        "\u0100".encode().decode("latin-1"),
    ]
)  # fmt: skip
segments = st.one_of(pieces, st.text(max_size=12).map(lambda t: t.encode().decode("latin-1")))
paths = st.lists(segments, max_size=5).map(lambda parts: "/" + "/".join(parts))
queries = st.one_of(
    st.just(""),
    st.sampled_from([f"?token={TOKEN}", "?token=wrong", "?token=", "?x=1&token=%FF", "?%%%"]),
    st.text(max_size=20).map(lambda t: "?" + t.encode().decode("latin-1")),
)
methods = st.one_of(
    st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "TRACE", "CONNECT"]),
    st.text(max_size=8).map(lambda t: t.encode().decode("latin-1")),
)
versions = st.sampled_from(["HTTP/1.0", "HTTP/1.1", "HTTP/2", "HTTP/", "FTP/1.0", ""])
credentials = st.sampled_from(
    [b"", BEARER, f"Cookie: {COOKIE}={session_value(TOKEN)}\r\n".encode(),
     f"Cookie: {COOKIE}={TOKEN}\r\n".encode(), b"Authorization: Bearer\r\n",
     b"Authorization: Basic \xff\xfe\r\n", b"Cookie: ;;==;\xff\r\n"]
)  # fmt: skip
# fmt: off
odd_headers = st.sampled_from(
    [b"Host: 127.0.0.1", b"Content-Length: -1", b"Content-Length: 99999999",
     b"Transfer-Encoding: chunked", b"Accept: application/openmetrics-text", b"Accept: \xff",
     b"no colon at all", b": empty name", b"X: " + b"v" * 3000, b"Range: bytes=0-1",
     b"Expect: 100-continue"]
)
# fmt: on
headers = st.lists(
    st.one_of(odd_headers, st.binary(max_size=40).filter(lambda b: b"\r\n\r\n" not in b)),
    max_size=4,
)
requests = st.builds(
    lambda method, path, query, version, creds, hs, body: (
        f"{method} {path}{query} {version}".encode("latin-1")
        + b"\r\n"
        + creds
        + b"".join(h + b"\r\n" for h in hs)
        + b"\r\n"
        + body
    ),
    methods,
    paths,
    queries,
    versions,
    credentials,
    headers,
    st.binary(max_size=200),
)
FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@FUZZ
@given(data=st.one_of(requests, st.binary(max_size=300)), shut=st.booleans())
def test_any_request_to_the_dashboard_is_answered_or_closed_and_ends_nothing(
    web: LivePeer, data: bytes, shut: bool
) -> None:
    answer = send(port_of(web, "dashboard"), data, shut)
    if answer:
        assert status_of(answer) in ANSWERED, answer[:300]  # never a 500: no handler failed
        got = headers_of(answer)
        assert got["x-frame-options"] == "DENY" and got["x-content-type-options"] == "nosniff"
        assert "set-cookie" not in got or got["set-cookie"].startswith(
            f"{COOKIE}={session_value(TOKEN)};"
        )
    still_serves(web)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.one_of(requests, st.binary(max_size=300)), shut=st.booleans())
def test_any_request_to_the_metrics_endpoint_is_answered_or_closed_and_ends_nothing(
    web: LivePeer, data: bytes, shut: bool
) -> None:
    answer = send(port_of(web, "metrics"), data, shut)
    if answer:
        assert status_of(answer) in {200, 400, 404}, answer[:300]
    still_serves(web)


# -- clients that are slow, stall, close half, or reset --------------------------------


def test_25_slow_clients_do_not_starve_a_normal_request(web: LivePeer) -> None:
    for which in ("dashboard", "metrics"):
        slow = []
        try:
            for i in range(25):
                sock = socket.create_connection(("127.0.0.1", port_of(web, which)), timeout=10)
                slow.append(sock)
                if i % 2:
                    sock.sendall(b"GET /api/status HTTP/1.0\r\nX: ")  # and never the rest
            for _ in range(3):
                if which == "dashboard":
                    assert status_of(get(web, "/api/status")) == 200
                else:
                    assert status_of(get(web, "/metrics", b"", "metrics")) == 200
        finally:
            for sock in slow:
                sock.close()
    still_serves(web)


def test_a_client_that_trickles_its_head_is_closed_at_the_head_deadline(web: LivePeer) -> None:
    with socket.create_connection(("127.0.0.1", port_of(web, "dashboard")), timeout=10) as sock:
        started = time.monotonic()
        closed = False
        for byte in b"GET /api/status HTTP/1.0\r\n" * 4:  # a byte every 0.1 s: 10 s in all
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            time.sleep(0.1)
        assert closed and time.monotonic() - started < 5  # head_timeout_s is 1 s here
    still_serves(web)


def test_event_streams_never_read_are_dropped_and_the_peer_goes_on(
    web: LivePeer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every snapshot 300 KB, as a cluster with many runs makes them.
    assert web.peer.dashboard is not None
    views = web.peer.dashboard.views
    real = views.snapshot

    async def big() -> dict[str, Any]:
        return dict(await real(), padding="x" * 300_000)

    monkeypatch.setattr(views, "snapshot", big)
    stalled: list[socket.socket] = []
    try:
        for _ in range(3):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(10)
            sock.connect(("127.0.0.1", port_of(web, "dashboard")))
            sock.sendall(b"GET /api/events HTTP/1.0\r\n" + BEARER + b"\r\n")
            stalled.append(sock)
        time.sleep(3)  # a snapshot every 0.1 s, none read: each stalls past timeout_s (1 s)
        still_serves(web)
        for sock in stalled:  # each was dropped: what it holds ends, and no more comes
            got, deadline = 0, time.monotonic() + 20
            try:
                while (chunk := sock.recv(1 << 20)) and time.monotonic() < deadline:
                    got += len(chunk)
            except ConnectionResetError:
                chunk = b""
            assert chunk == b"", "a stream that was never read is still being fed"
            assert got < 50_000_000
    finally:
        monkeypatch.undo()
        for sock in stalled:
            sock.close()
    still_serves(web)


def test_half_closed_and_reset_clients_cost_only_their_connection(web: LivePeer) -> None:
    port = port_of(web, "dashboard")
    whole = b"GET /api/status HTTP/1.0\r\n" + BEARER + b"\r\n"
    assert status_of(send(port, whole, shut=True)) == 200  # the head, then our side closed
    assert send(port, whole[:20], shut=True) == b""  # closed before the head's end
    for cut in (0, 10, len(whole)):  # a reset before, in or after the head
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.sendall(whole[:cut])
        sock.close()
    events = socket.create_connection(("127.0.0.1", port), timeout=10)
    events.sendall(b"GET /api/events HTTP/1.0\r\n" + BEARER + b"\r\n")
    assert events.recv(100).startswith(b"HTTP/1.0 200 OK")
    events.shutdown(socket.SHUT_WR)  # a reader that closes its side, and then goes
    events.close()
    still_serves(web)


# -- issue 45, one request each -----------------------------------------------------------


def test_a_run_no_one_knows_is_a_404_page_not_an_empty_min(web: LivePeer) -> None:
    answer = get(web, f"/api/run/{UNKNOWN}")
    assert status_of(answer) == 404
    assert b'"found": false' in answer and b'"span": []' in answer
    assert status_of(get(web, f"/api/run/{UNKNOWN}/trace.json")) == 200  # an empty trace
    still_serves(web)


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/api/run/%252e..", 404),
        ("/api/run/%2e%2e/trace.json", 404),
        ("/api/run/..%2f..%2fetc/trace.json", 404),
        ("/api/run/%C4%80", 404),  # valid UTF-8, no run id
        ("/api/run/%C4%80/trace.json", 404),
        ("/%FF%FE", 400),  # not UTF-8
        ("/api/run/%FF%FE/trace.json", 400),
        ("/api/run/%C4", 400),
    ],
)
def test_odd_paths_are_refused_and_end_nothing(web: LivePeer, path: str, code: int) -> None:
    assert status_of(get(web, path)) == code
    still_serves(web)


def test_a_line_break_in_a_run_id_never_reaches_a_header(web: LivePeer) -> None:
    for run_id in ("x%0d%0aSet-Cookie:%20a=1", "x%0aSet-Cookie:%20a=1", "x%22%3b%20a=b"):
        answer = get(web, f"/api/run/{run_id}/trace.json")
        assert status_of(answer) in (400, 404)
        head = answer.split(b"\r\n\r\n")[0].lower()
        assert b"set-cookie" not in head and b"content-disposition" not in head
    ok = get(web, f"/api/run/{UNKNOWN}/trace.json")
    disposition = headers_of(ok)["content-disposition"]
    assert disposition == f'attachment; filename="satind-trace-{UNKNOWN}.json"'
    still_serves(web)


def test_a_history_row_of_bad_json_is_marked_and_the_listing_and_page_work(
    web: LivePeer,
) -> None:
    h = web.peer.cfg.history
    store = HistoryStore(Path(h.path), h)
    now = time.time()  # within the history's retention
    record = m.RunRecord(
        DAMAGED, "tree", ["3"], "c0de", "client", ["tp/0@0"], "done", now - 1, now, 1.0
    )
    good = dataclasses.replace(record, run_id="20260101-000002-900d00")
    store.write(Entry(dataclasses.replace(record, log=["a line"])))
    store.write(Entry(good))
    with sqlite3.connect(h.path) as db:
        db.execute(
            "UPDATE runs SET argv = '[\"3\"', log = 'not json', stats = '{}}' WHERE run_id = ?",
            (DAMAGED,),
        )
    page = get(web, f"/api/run/{DAMAGED}")
    assert status_of(page) == 200
    assert b"damaged in the run history: argv, stats, log unreadable" in page
    # `satind runs` of this machine (by the runs' owner): every run listed, the damaged one marked.
    with tls_client(web) as sock:
        request = m.HistoryRequest(7, "", [], 0.0, 20, local=True)
        sock.sendall(codec.frame(codec.encode_message(request)))
        replies = read_frames(sock, 2)
    reply = replies[1]
    assert isinstance(reply, m.HistoryReply) and reply.error == ""
    listed = {r.run_id: r for r in reply.runs}
    assert {DAMAGED, good.run_id} <= set(listed)
    assert listed[DAMAGED].argv == [] and "damaged" in listed[DAMAGED].error
    assert listed[good.run_id].argv == ["3"]
    still_serves(web)


def test_the_token_is_traded_for_a_cookie_that_is_not_it_by_a_redirect(web: LivePeer) -> None:
    answer = get(web, f"/api/status?x=1&token={TOKEN}", b"")
    assert status_of(answer) == 303
    got = headers_of(answer)
    assert got["location"] == "/api/status?x=1"
    cookie = got["set-cookie"]
    value = session_value(TOKEN)
    assert cookie == f"{COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/"  # no TLS here
    assert TOKEN not in cookie
    assert status_of(get(web, "/api/status", f"Cookie: {COOKIE}={value}\r\n".encode())) == 200
    assert status_of(get(web, "/api/status", f"Cookie: {COOKIE}={TOKEN}\r\n".encode())) == 401
    assert status_of(get(web, "/?token=wrong", b"")) == 401
    assert status_of(get(web, "/api/status", b"")) == 401


def test_every_answer_carries_the_security_headers_and_the_page_its_policy(
    web: LivePeer,
) -> None:
    for path, extra in (("/", BEARER), ("/api/status", b""), ("/nope", BEARER), ("/?token=x", b"")):
        got = headers_of(get(web, path, extra))
        assert got["x-frame-options"] == "DENY"
        assert got["x-content-type-options"] == "nosniff"
        assert got["referrer-policy"] == "no-referrer"
        policy = got["content-security-policy"]
        assert policy.startswith("default-src 'self'; script-src 'sha256-")
        assert "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
    answer = send(port_of(web, "dashboard"), b"POST / HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc")
    assert status_of(answer) == 405 and headers_of(answer)["allow"] == "GET, HEAD"
    metrics = headers_of(get(web, "/metrics", b"", "metrics"))
    assert metrics["x-frame-options"] == "DENY" and metrics["referrer-policy"] == "no-referrer"
