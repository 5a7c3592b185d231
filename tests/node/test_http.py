"""The endpoints' connections (node/http.py): whatever a handler or a client does, it costs
its own connection, never the task that serves the endpoint (a peer's nursery). Real
loopback sockets; each test bounded by ``fail_after``."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest
import trio

from satind.config import DashboardConfig
from satind.node.http import SECURITY_HEADERS, Endpoint, Exchange, answer

Handler = Callable[[bytes, Exchange], Awaitable[None]]


@dataclass(frozen=True)
class Limits:
    max_connections: int = 8
    max_request_bytes: int = 1024
    head_timeout_s: float = 30.0
    timeout_s: float = 0.5


async def ok(head: bytes, ex: Exchange) -> None:
    await ex.answer(200, "text/plain", b"fine\n")


@asynccontextmanager
async def serving(
    handler: Handler, limits: Limits | DashboardConfig
) -> AsyncIterator[tuple[Endpoint, int]]:
    """An endpoint on a free loopback port; the test fails if its serving task ends."""
    endpoint = Endpoint("test", limits, handler)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:

        async def serve() -> None:
            await endpoint.serve(listeners)
            raise AssertionError("the endpoint stopped serving")

        nursery.start_soon(serve)
        yield endpoint, port
        nursery.cancel_scope.cancel()


async def exchange(port: int, data: bytes, half_close: bool = False) -> bytes:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(data)
        if half_close:
            await stream.send_eof()
        out = b""
        try:
            while chunk := await stream.receive_some(65536):
                out += chunk
        except trio.BrokenResourceError:
            pass  # closed with our bytes unread: a reset
        return out


GET = b"GET / HTTP/1.0\r\n\r\n"


async def test_a_handler_that_raises_gets_a_500_and_a_warning_and_nothing_else_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken(head: bytes, ex: Exchange) -> None:
        if b"/boom" in head:
            raise ValueError("min() arg is an empty sequence")
        if b"/late" in head:
            await ex.start_stream("text/event-stream", [])
            raise KeyError("after the head went out")
        await ok(head, ex)

    with trio.fail_after(10), caplog.at_level(logging.WARNING, "satind.node.http"):
        async with serving(broken, Limits()) as (endpoint, port):
            got = await exchange(port, b"GET /boom HTTP/1.0\r\n\r\n")
            assert got.startswith(b"HTTP/1.0 500 Internal Server Error\r\n")
            assert got.endswith(b"Internal Server Error: the peer's log says why\n")
            assert b"empty sequence" not in got  # the traceback goes to the log only
            late = await exchange(port, b"GET /late HTTP/1.0\r\n\r\n")
            assert late.startswith(b"HTTP/1.0 200") and b"500" not in late
            assert (await exchange(port, GET)).startswith(b"HTTP/1.0 200 OK")
            assert endpoint.open == 0
    failed = [r for r in caplog.records if "a request failed" in r.getMessage()]
    assert len(failed) == 2 and all(r.exc_info for r in failed)
    assert failed[0].levelno == logging.WARNING


async def test_every_answer_says_not_to_frame_sniff_or_refer_it() -> None:
    with trio.fail_after(10):
        async with serving(ok, Limits()) as (_, port):
            got = await exchange(port, GET)
    head = got.split(b"\r\n\r\n")[0].decode()
    for name, value in SECURITY_HEADERS:
        assert f"\r\n{name}: {value}\r\n" in head
    assert "\r\nContent-Security-Policy: default-src 'none'" in head


@pytest.mark.parametrize(
    "value", ["x\r\nSet-Cookie: a=1", "x\nLocation: /", "x\rX", "a\x00b", "\u0100", "x\x7f"]
)
def test_no_header_carries_a_line_break_a_control_or_a_character_latin1_lacks(
    value: str,
) -> None:
    with pytest.raises(ValueError):
        answer(200, "text/plain", b"", headers=[("Content-Disposition", value)])
    answer(200, "text/plain", b"", headers=[("X", "tab\tand latin-1 é")])


async def test_a_reader_that_stalls_is_dropped_and_the_endpoint_goes_on() -> None:
    sent = 0
    flowing, dropped = trio.Event(), trio.Event()

    async def flood(head: bytes, ex: Exchange) -> None:
        nonlocal sent
        if b"/api/events" not in head:
            await ok(head, ex)
            return
        try:
            await ex.start_stream("text/event-stream", [])
            chunk = b"data: " + b"x" * 16_000 + b"\n\n"  # a few of them fill the buffers
            for _ in range(10_000):
                await ex.send(chunk)
                sent += 1
                flowing.set()
        finally:
            dropped.set()

    with trio.fail_after(20):
        async with serving(flood, Limits()) as (endpoint, port):
            stalled = await trio.open_tcp_stream("127.0.0.1", port)
            await stalled.send_all(b"GET /api/events HTTP/1.0\r\n\r\n")
            await flowing.wait()
            await dropped.wait()  # never read: a send stalls past timeout_s, and it is dropped
            assert sent < 10_000 and endpoint.open == 0
            assert (await exchange(port, GET)).startswith(b"HTTP/1.0 200")
            await stalled.aclose()


async def test_a_normal_request_is_served_beside_25_slow_clients() -> None:
    async def slow(port: int, started: trio.Event, drip: bool) -> None:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            started.set()
            # Past max_connections the server closes the oldest to make room: a dripping
            # client then finds its connection broken, as it should.
            with trio.move_on_after(60), contextlib.suppress(trio.BrokenResourceError):
                while True:  # a byte a while, never a whole head; or nothing at all
                    if drip:
                        await stream.send_all(b"G")
                    await trio.sleep(0.2)

    for limits in (DashboardConfig(head_timeout_s=60), Limits(max_connections=8)):
        with trio.fail_after(15):
            async with serving(ok, limits) as (endpoint, port), trio.open_nursery() as clients:
                for i in range(25):
                    started = trio.Event()
                    clients.start_soon(slow, port, started, i % 2 == 0)
                    await started.wait()
                await trio.sleep(0.3)  # every slow one accepted (or closed to make room)
                assert endpoint.open == min(25, limits.max_connections)
                for _ in range(3):  # well before any head deadline
                    assert (await exchange(port, GET)).startswith(b"HTTP/1.0 200 OK")
                clients.cancel_scope.cancel()


async def test_past_the_limit_a_new_connection_is_closed_when_every_one_is_answered() -> None:
    release, both = trio.Event(), trio.Event()
    held_now = 0

    async def hold(head: bytes, ex: Exchange) -> None:
        nonlocal held_now
        held_now += 1
        if held_now == 2:
            both.set()
        await release.wait()
        await ok(head, ex)

    with trio.fail_after(10):
        async with serving(hold, Limits(max_connections=2)) as (endpoint, port):
            async with trio.open_nursery() as nursery:
                answers: list[bytes] = []

                async def held() -> None:
                    answers.append(await exchange(port, GET))

                nursery.start_soon(held)
                nursery.start_soon(held)
                await both.wait()
                assert endpoint.open == 2
                assert await exchange(port, GET) == b""  # closed at once, not left waiting
                release.set()
            assert [a[:15] for a in answers] == [b"HTTP/1.0 200 OK"] * 2


async def test_a_half_closed_client_gets_its_answer_or_is_closed_when_its_head_is_cut() -> None:
    with trio.fail_after(10):
        async with serving(ok, Limits()) as (endpoint, port):
            assert (await exchange(port, GET, half_close=True)).startswith(b"HTTP/1.0 200")
            assert await exchange(port, b"GET / HTTP/1.0\r\n", half_close=True) == b""
            assert await exchange(port, b"", half_close=True) == b""
            assert endpoint.open == 0


async def test_a_body_the_handler_does_not_read_does_not_cost_the_client_its_answer() -> None:
    body = b"x" * 32_000
    post = b"POST / HTTP/1.0\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    with trio.fail_after(10):
        async with serving(ok, Limits()) as (_, port):
            for _ in range(5):
                assert (await exchange(port, post)).endswith(b"fine\n")
