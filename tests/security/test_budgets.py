"""What a client may hold on a peer (issue 28, point 6): stalled frame headers, frames it
really sends, replies it does not read, connections it leaves idle, opens and closes.

The transport is driven directly: over in-memory streams with the autojump clock where the
test needs exact control of what the client reads, over real TLS on localhost where the TLS
state itself is what is checked."""

from __future__ import annotations

import gc
from collections.abc import Callable
from functools import partial

import pytest
import trio
import trio.testing

from satind import heap
from satind.config import NetConfig
from satind.net import codec, tls
from satind.net import messages as m
from satind.net.framing import FrameReader
from satind.net.transport import Address, Connection, Identity, TcpTransport

KiB = 1024
MiB = 1024 * KiB
# Frames of 1 MiB at most; a stalled frame is held for 600 s (nothing in these tests waits
# that long: an answer that needs the stalled frames' deadline is an answer that fails).
CFG = NetConfig(
    max_frame_bytes=MiB,
    read_timeout_s=600.0,
    max_receive_bytes=4 * MiB,
    max_client_receive_bytes=2 * MiB,
    max_receive_bytes_per_client=MiB + 128 * KiB,
    max_outbox_bytes=256 * KiB,
    max_client_send_bytes=MiB,
    max_send_bytes_per_client=512 * KiB,
    trim_after_bytes=64 * KiB,
)


class Inbox:
    def __init__(self, answer: Callable[[Connection, m.Message], None] | None = None) -> None:
        self.got: list[tuple[str, m.Message]] = []
        self.answer = answer
        self.event = trio.Event()

    def __call__(self, conn: Connection, msg: m.Message) -> None:
        self.got.append((conn.remote_name, msg))
        self.event.set()
        if self.answer is not None:
            self.answer(conn, msg)

    async def wait_for(self, count: int) -> None:
        while len(self.got) < count:
            self.event = trio.Event()
            await self.event.wait()


class Remote:
    """The other end of an in-memory connection to the transport under test."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.reader = FrameReader(stream, NetConfig())

    async def send(self, msg: m.Message) -> None:
        await self.stream.send_all(codec.frame(codec.encode_message(msg)))

    async def closed_by_the_peer(self) -> bool:
        """Read until the end of the stream (frames the peer sent are skipped)."""
        while await self.stream.receive_some(65536):
            pass
        return True


async def attach(
    nursery: trio.Nursery, server: TcpTransport, name: str, role: str, lockstep: bool = False
) -> Remote:
    """A party that connected to ``server`` and said Hello. ``lockstep``: the server's
    writes complete only as far as this party reads (no buffer between them)."""
    pair = trio.testing.lockstep_stream_pair if lockstep else trio.testing.memory_stream_pair
    ours, theirs = pair()
    nursery.start_soon(server._accepted, theirs)  # type: ignore[arg-type]  # a stream pair
    remote = Remote(ours)
    body = await remote.reader.read()  # the server's Hello first: lockstep needs that order
    assert body is not None and isinstance(codec.decode_message(body), m.Hello)
    await remote.send(m.Hello(m.PROTOCOL_VERSION, name, "c", role))
    return remote


def big_submit(req: int, size: int) -> m.Submit:
    return m.Submit(req, "tree", ["x" * size])


async def test_stalled_headers_from_a_client_hold_back_neither_members_nor_other_clients(
    autojump_clock: trio.testing.MockClock,
) -> None:
    inbox = Inbox()
    server = TcpTransport(Identity("s/0", "c", "peer"), CFG, inbox)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            # Four connections of one client each declare a frame as large as allowed, and
            # send nothing more: together as much as the members' whole budget.
            attackers = [await attach(nursery, server, f"attacker~{i}", "client") for i in range(4)]
            for attacker in attackers:
                await attacker.stream.send_all(codec.FRAME_HEADER.pack(CFG.max_frame_bytes))
            member = await attach(nursery, server, "m/0", "peer")
            other = await attach(nursery, server, "other~1", "client")
            await member.send(big_submit(1, 900 * KiB))
            await other.send(big_submit(2, 900 * KiB))
            await inbox.wait_for(2)
            assert sorted(name for name, _ in inbox.got) == ["m/0", "other~1"]
            assert server.counters.bad_frames == 0
            # The stalled headers cost what came of them: four bytes each.
            assert server._clients["attacker"].received.used == 4 * 4
            assert len(server._clients["attacker"].conns) == 4
            nursery.cancel_scope.cancel()


async def test_a_client_is_held_to_its_own_share_of_what_frames_may_hold(
    autojump_clock: trio.testing.MockClock,
) -> None:
    inbox = Inbox()
    server = TcpTransport(Identity("s/0", "c", "peer"), CFG, inbox)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            first = await attach(nursery, server, "attacker~1", "client")
            second = await attach(nursery, server, "attacker~2", "client")
            header = codec.FRAME_HEADER.pack(CFG.max_frame_bytes)
            await first.stream.send_all(header + b"\0" * (600 * KiB))
            # The client's share (1.125 MiB) has 600 KiB of the first frame: the second
            # connection goes over it on the way and is closed at once, not at its deadline.
            await second.stream.send_all(header + b"\0" * (600 * KiB))
            assert await second.closed_by_the_peer()
            assert server.counters.bad_frames == 1
            # Members and other clients still get whole frames through.
            member = await attach(nursery, server, "m/0", "peer")
            other = await attach(nursery, server, "other~1", "client")
            await member.send(big_submit(1, 900 * KiB))
            await other.send(big_submit(2, 900 * KiB))
            await inbox.wait_for(2)
            assert len(server._clients["attacker"].conns) == 1  # the first one goes on
            assert server._clients["attacker"].received.used == 4 + 600 * KiB
            nursery.cancel_scope.cancel()


async def test_a_client_that_does_not_read_is_cut_off_holding_at_most_its_outbox(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    trims: list[int] = []
    monkeypatch.setattr(heap, "trim", lambda: _count(trims))
    reply = m.StatusReply(0, [m.PeerStatus("s/0", "c", "x" * (16 * KiB))], [])
    reply_bytes = len(codec.frame(codec.encode_message(reply)))
    accepted: list[int] = []  # replies the server took into its outbox

    def answer(conn: Connection, msg: m.Message) -> None:
        if isinstance(msg, m.StatusRequest) and conn.post(reply):
            accepted.append(reply_bytes)

    server = TcpTransport(Identity("s/0", "c", "peer"), CFG, Inbox(answer))
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            slow = await attach(nursery, server, "slow~1", "client", lockstep=True)
            request = codec.frame(codec.encode_message(m.StatusRequest(1, False)))
            # The client asks and never reads: the lockstep stream holds nothing, so every
            # reply the server took is still in the server's memory.
            with pytest.raises(trio.BrokenResourceError):
                for _ in range(1000):
                    await slow.stream.send_all(request)
            assert server.counters.outbox_overflows == 1
            assert sum(accepted) <= CFG.max_outbox_bytes, len(accepted)
            await trio.testing.wait_all_tasks_blocked()  # the server's side has closed too
            # All it held went with it, and the heap was handed back.
            assert server._clients == {}
            assert server._clients_out.used == 0
            assert trims
            nursery.cancel_scope.cancel()


async def test_idle_connections_of_a_client_make_room_for_its_new_ones(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cfg = NetConfig(max_client_connections=2)
    server = TcpTransport(
        Identity("s/0", "c", "peer"),
        cfg,
        Inbox(),
        busy=lambda conn: conn.remote_name == "me~asking",  # has a request being answered
    )
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            await attach(nursery, server, "me~asking", "client")
            await trio.sleep(1)
            idle = await attach(nursery, server, "me~idle", "client")
            await trio.sleep(1)
            # At the cap: the idle one goes, not the one idle longer that is being answered.
            sending = await attach(nursery, server, "me~sending", "client")
            assert await idle.closed_by_the_peer()
            # Busy, or in the middle of a frame: nobody makes room, the new one is refused.
            await sending.stream.send_all(codec.FRAME_HEADER.pack(100) + b"\0" * 10)
            await trio.testing.wait_all_tasks_blocked()
            refused = await attach(nursery, server, "me~late", "client")
            body = await refused.reader.read()
            assert body is not None
            bye = codec.decode_message(body)
            assert isinstance(bye, m.Bye) and "none of them idle" in bye.reason
            assert server.counters.refused_connections == 1
            assert {c.remote_name for c in server._clients["me"].conns} == {
                "me~asking",
                "me~sending",
            }
            nursery.cancel_scope.cancel()


def _ssl_streams() -> int:
    return sum(isinstance(obj, trio.SSLStream) for obj in gc.get_objects())


def _count(calls: list[int]) -> bool:
    """A stand-in for heap.trim that counts its calls (and says it trimmed)."""
    calls.append(1)
    return True


async def test_closed_connections_leave_nothing_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []
    monkeypatch.setattr(heap, "trim", lambda: _count(trims))
    keys = tls.EphemeralKeys.make("s", "client")
    cfg = NetConfig(max_frame_bytes=4 * KiB, max_client_connections=2, connect_timeout_s=5.0)

    def answer(conn: Connection, msg: m.Message) -> None:
        conn.post(m.StatusReply(getattr(msg, "req", 0), [], []))

    server = TcpTransport(Identity("s/0", "c", "peer"), cfg, Inbox(answer), credentials=keys.node)

    async def client(
        name: str,
        message: m.Message | None = None,
        replies: int = 0,
        crowd: trio.Event | None = None,
    ) -> None:
        """Connect as ``name`` with the client certificate, send ``message``, wait for
        ``replies`` answers or else until the server closes the connection (in a ``crowd``:
        until the server closes one of the crowd's), and go."""
        inbox = Inbox()
        closed = crowd if crowd is not None else trio.Event()
        party = TcpTransport(
            Identity(name, "", "client"),
            NetConfig(),
            inbox,
            on_closed=lambda conn: closed.set(),
            credentials=keys.client,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(party.run)
            conn = await party.dial(address)
            if message is not None:
                conn.post(message)
            with trio.move_on_after(10):
                await (inbox.wait_for(replies) if replies else closed.wait())
            nursery.cancel_scope.cancel()

    gc.collect()
    gc.disable()  # what is left is what reference counting did not free
    try:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                address = await nursery.start(server.run, Address("127.0.0.1", 0))
                before = _ssl_streams()
                # Asks, gets its answer, goes.
                for i in range(5):
                    await client(f"client~{i}", m.StatusRequest(1, False), replies=1)
                # Sends a frame over the cap: closed by the server.
                await client("client~big", big_submit(1, 8 * KiB))
                # Presents a name its certificate does not grant: refused in the handshake.
                await client("mallory~1")
                # Not TLS at all.
                stream = await trio.open_tcp_stream(address.host, address.port)
                await stream.send_all(b"GET / HTTP/1.1\r\n\r\n")
                await stream.aclose()
                # One connection more than its certificate may hold: the idlest makes room.
                crowd = trio.Event()
                async with trio.open_nursery() as inner:
                    for i in range(3):
                        inner.start_soon(partial(client, f"client~many{i}", crowd=crowd))
                # The server's side of each ends a moment after the client's.
                while server._accepted_open or server._conns:  # noqa: ASYNC110
                    await trio.sleep(0.01)
                # Nothing waits for the cyclic collector: no TLS stream of any of them (the
                # clients' ends included) is left.
                assert _ssl_streams() == before
                assert server._clients == {}
                for budget in (
                    server._peers_in,
                    server._peers_out,
                    server._clients_in,
                    server._clients_out,
                ):
                    assert budget.used == 0, budget.setting
                # The last client gone, what they let go of went back to the system.
                assert trims and server._released == 0
                nursery.cancel_scope.cancel()
    finally:
        gc.enable()
