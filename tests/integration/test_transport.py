"""The TCP transport in one process: handshake, messages both ways, and bad input costing
one connection only."""

from __future__ import annotations

import trio
import trio.testing

from satind.config import NetConfig
from satind.net import codec
from satind.net import messages as m
from satind.net.transport import Address, Connection, Identity, TcpTransport

CFG = NetConfig(max_frame_bytes=4096, connect_timeout_s=2.0)


class Inbox:
    def __init__(self) -> None:
        self.got: list[tuple[str, m.Message]] = []
        self.event = trio.Event()

    def __call__(self, conn: Connection, msg: m.Message) -> None:
        self.got.append((conn.remote_name, msg))
        self.event.set()

    async def wait_for(self, count: int) -> None:
        while len(self.got) < count:
            self.event = trio.Event()
            await self.event.wait()


async def _pair(nursery: trio.Nursery) -> tuple[TcpTransport, Inbox, TcpTransport, Inbox, Address]:
    inbox_a, inbox_b = Inbox(), Inbox()
    addresses: dict[str, Address] = {}
    a = TcpTransport(Identity("a", "c0", "peer"), CFG, inbox_a, resolve=addresses.get)
    b = TcpTransport(Identity("b", "c1", "peer"), CFG, inbox_b, resolve=addresses.get)
    addresses["a"] = await nursery.start(a.run, Address("127.0.0.1", 0))
    addresses["b"] = await nursery.start(b.run, Address("127.0.0.1", 0))
    return a, inbox_a, b, inbox_b, addresses["b"]


async def test_messages_flow_both_ways_and_count_wide_traffic() -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            a, inbox_a, b, inbox_b, _ = await _pair(nursery)
            for i in range(3):
                a.post("b", m.StealRequest(i, True))
            await inbox_b.wait_for(3)
            assert [msg for _, msg in inbox_b.got] == [m.StealRequest(i, True) for i in range(3)]
            assert inbox_b.got[0][0] == "a"
            b.post("a", m.StealReply(0, None))  # reuses the connection a opened
            await inbox_a.wait_for(1)
            assert inbox_a.got == [("b", m.StealReply(0, None))]
            assert a.counters.messages_wide == 3 and a.counters.messages_local == 0
            nursery.cancel_scope.cancel()


async def test_unreachable_destination_is_counted_not_raised() -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            a, _, _, _, _ = await _pair(nursery)
            a.post("nobody", m.Bye("x"))
            assert a.counters.send_failures == 1
            nursery.cancel_scope.cancel()


async def _raw(address: Address, data: bytes) -> bytes:
    """Send raw bytes, return everything the server sends until it closes."""
    stream = await trio.open_tcp_stream(address.host, address.port)
    await stream.send_all(data)
    received = b""
    while chunk := await stream.receive_some(65536):
        received += chunk
    await stream.aclose()
    return received


async def test_garbage_closes_that_connection_only() -> None:
    hello = codec.frame(codec.encode_message(m.Hello(m.PROTOCOL_VERSION, "x", "c9", "client")))
    cases = [
        b"GET / HTTP/1.1\r\n\r\n",  # not a frame at all: the length prefix is huge
        codec.FRAME_HEADER.pack(5) + b"\xff\xff\xff\xff\xff",  # a frame that is not CBOR
        codec.frame(codec.encode_message(m.StealRequest(1, False))),  # no Hello first
        codec.frame(codec.encode_message(m.Hello(999, "x", "c9", "peer"))),  # wrong version
        hello + codec.FRAME_HEADER.pack(5) + b"\x00\x01\x02\x03\x04",  # bad frame after hello
        hello + codec.frame(b"\xa1\x61t\x19\x27\x0f"),  # unknown message type
    ]
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            a, _, b, inbox_b, b_address = await _pair(nursery)
            for data in cases:
                await _raw(b_address, data)  # returns: the peer closed the connection
            # The peer is unharmed: a good party still gets through.
            a.post("b", m.StealRequest(7, False))
            await inbox_b.wait_for(1)
            assert inbox_b.got[-1] == ("a", m.StealRequest(7, False))
            assert all(name != "x" for name, _ in inbox_b.got)
            assert b.counters.bad_frames >= len(cases) - 1
            nursery.cancel_scope.cancel()


async def test_silent_client_is_dropped_after_the_handshake_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cfg = NetConfig(connect_timeout_s=3.0)
    server = TcpTransport(Identity("s", "c0", "peer"), cfg, Inbox())
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            address = await nursery.start(server.run, Address("127.0.0.1", 0))
            stream = await trio.open_tcp_stream(address.host, address.port)
            start = trio.current_time()
            received = b""
            # The server's Hello arrives, then the server gives up on us and closes.
            while chunk := await stream.receive_some(65536):
                received += chunk
            assert trio.current_time() - start >= 3.0
            assert codec.decode_message(received[4:]) == m.Hello(
                m.PROTOCOL_VERSION, "s", "c0", "peer"
            )
            nursery.cancel_scope.cancel()


async def test_connections_give_up_data_a_cut_link_does_not_acknowledge() -> None:
    """Both ends of a connection carry net.tcp_user_timeout_s as TCP_USER_TIMEOUT, so that a
    connection that lived through a cut link does not hold its messages in TCP's back-off
    after the heal (tests/testbed/test_partitions.py measures the heal)."""
    import socket

    from satind.net.transport import tune

    cfg = NetConfig(tcp_user_timeout_s=2.5)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    async with trio.open_nursery() as nursery:
        accepted: list[trio.SocketStream] = []
        got = trio.Event()

        async def serve(stream: trio.SocketStream) -> None:
            tune(stream, cfg)
            accepted.append(stream)
            got.set()
            await trio.sleep_forever()

        nursery.start_soon(trio.serve_listeners, serve, listeners)
        dialled = await trio.open_tcp_stream("127.0.0.1", port)
        tune(dialled, cfg)
        await got.wait()
        for stream in (dialled, accepted[0]):
            value = stream.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
            assert value == 2500
        await dialled.aclose()
        nursery.cancel_scope.cancel()
