"""The TCP/TLS transport: messages to named parties over framed, authenticated connections.

Peers talk in messages, not bytes: ``post(dest, msg)`` queues a message for a peer (or a
connected client) and never blocks; incoming messages go to one ``on_message(conn, msg)``
callback, which is synchronous (the decision code is sans-I/O; it spawns tasks when it has
to wait). The TCP transport keeps at most one live connection per remote party and reuses a
connection the other side opened, dials on first use, frames messages (codec.py), and closes a
connection — only that one — on anything malformed.

A connection starts with a Hello in each direction inside ``connect_timeout_s``: the protocol
versions must match, and the Hello names the remote party and its cluster (with TLS, the name
is checked against the certificate).

Whatever a remote party sends costs at most its own connection (DESIGN "Wire and security"):

* one place, ``handle_frame``, decodes, validates and dispatches every frame, and turns any
  exception on the way into "close this connection, count it, log it";
* every resource a connection holds is bounded (the ``[net]`` settings): the frame it is
  receiving (``max_frame_bytes``, within ``read_timeout_s``), what waits to be written to it
  (``max_outbox_bytes``), and how many connections there are (``max_connections``,
  ``max_client_connections``);
* what frames being received and messages waiting to be written cost the peer is charged to
  budgets by who the remote party is: members share ``max_receive_bytes`` and
  ``max_send_bytes``; clients share budgets of their own, each client certificate within
  its own share of them (``ByteBudget``). A client can use up its own budgets, never its
  members' nor another client's;
* a closed connection leaves nothing behind: everything kept per connection or per client
  goes with its last connection (``_ClientShare``), and the TLS state is freed at once, by
  reference counting (no cycle waits for the collector; log records get a failure's text,
  not the exception, whose traceback would hold the connection's frames).
"""

from __future__ import annotations

import contextlib
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

import satind.heap as heap
from satind.config import EmulationConfig, NetConfig
from satind.net import codec, tls
from satind.net import messages as m
from satind.net.framing import Address as Address
from satind.net.framing import ByteBudget, FrameReader
from satind.net.framing import Identity as Identity
from satind.net.framing import Link as Link
from satind.net.framing import TrafficCounters as TrafficCounters
from satind.net.framing import handle_frame as handle_frame
from satind.net.framing import parse_address as parse_address
from satind.net.names import answers_to
from satind.net.outbox import Outbox

log = logging.getLogger(__name__)


# bytes. What a connection costs the peer besides its frames and queue (its TLS state and
# buffers, its tasks): about 22 KB measured (benchmarks/hostile.py, churn). Counted as let go
# of when it closes (net.trim_after_bytes).
CONNECTION_BYTES = 24 * 1024


class Connection:
    """One live link to a remote party, with an outbox drained by its writer task."""

    def __init__(
        self,
        transport: TcpTransport,
        remote: Identity | None,
        outbound: bool,
        within: ByteBudget,
    ) -> None:
        self.transport = transport
        self.remote = remote
        self.outbound = outbound
        # What is queued or being written, within the budget of the remote's kind (members,
        # or its client's share). Frames are joined unless wide-area emulation times each.
        self.outbox = Outbox(
            ByteBudget(transport.cfg.max_outbox_bytes, "net.max_outbox_bytes", within),
            join=not (transport.emulation.latency_ms > 0 or transport.emulation.bandwidth_mbps > 0),
        )
        self.wakeup = trio.Event()
        self.closed = False
        self.cancel_scope = trio.CancelScope()
        self.last_received = trio.current_time()  # when its last frame came

    @property
    def remote_name(self) -> str:
        return self.remote.name if self.remote else "?"

    def post(self, msg: m.Message) -> bool:
        """Queue a message; it is sent in order after everything queued before it. False when
        it was dropped: the connection is closed, the message is larger than the frame cap
        (the other side would refuse it), or the reader is too far behind (the connection is
        closed then)."""
        transport = self.transport
        if self.closed:
            transport.counters.send_failures += 1
            return False
        data = codec.frame(codec.encode_message(msg))
        cfg = transport.cfg
        if len(data) - 4 > cfg.max_frame_bytes:
            transport.counters.send_failures += 1
            log.error(
                "not sending %s of %d bytes to %s: over net.max_frame_bytes (%d)",
                type(msg).__name__,
                len(data) - 4,
                self.remote_name,
                cfg.max_frame_bytes,
            )
            return False
        outbox = self.outbox
        held = outbox.budget.used
        full = outbox.add(data, trio.current_time())
        if full is not None:
            transport.counters.outbox_overflows += 1
            transport.counters.send_failures += 1
            log.warning(
                "closing connection to %s: %d bytes wait to be written to it, and %d more "
                "would go over %s (%d bytes, %d used)",
                self.remote_name,
                held,
                len(data),
                full.setting,
                full.limit,
                full.used,
            )
            self.close()
            return False
        self.wakeup.set()
        return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._drop_outbox()
        self.cancel_scope.cancel()

    def _drop_outbox(self) -> None:
        self.outbox.clear()


@dataclass
class _ClientShare:
    """What one client certificate holds on this peer, over all its connections; it goes
    with its last connection."""

    received: ByteBudget
    queued: ByteBudget
    # Its live connections, each with its reader.
    conns: dict[Connection, FrameReader] = field(default_factory=dict)


MessageHandler = Callable[[Connection, m.Message], None]


class HandshakeError(Exception):
    pass


@dataclass
class TcpTransport:
    """Messages over TCP (optionally TLS). Run it with ``run``; post from trio code."""

    identity: Identity
    cfg: NetConfig
    on_message: MessageHandler
    # Maps a peer name to its address; None when unknown (then only a connection the peer
    # opened to us can reach it).
    resolve: Callable[[str], Address | None] = lambda name: None
    on_closed: Callable[[Connection], None] = lambda conn: None
    counters: TrafficCounters = field(default_factory=TrafficCounters)
    # Whether a connection has requests being answered (the node knows): such a connection
    # is never closed to make room for another of the same client.
    busy: Callable[[Connection], bool] = lambda conn: False
    # TLS credentials; None means plain TCP (only for tests and benchmarks that say so).
    credentials: tls.Credentials | None = None
    emulation: EmulationConfig = field(default_factory=EmulationConfig)

    def __post_init__(self) -> None:
        self._conns: dict[str, Connection] = {}
        cfg = self.cfg
        # Frames being received and messages waiting to be written, by who the remote is:
        # members and clients never draw on the same budget.
        self._peers_in = ByteBudget(cfg.max_receive_bytes, "net.max_receive_bytes")
        self._peers_out = ByteBudget(cfg.max_send_bytes, "net.max_send_bytes")
        self._clients_in = ByteBudget(cfg.max_client_receive_bytes, "net.max_client_receive_bytes")
        self._clients_out = ByteBudget(cfg.max_client_send_bytes, "net.max_client_send_bytes")
        # Accepted connections open now (in the handshake or live), and what each client
        # certificate holds (net.max_connections, net.max_client_connections).
        self._accepted_open = 0
        self._clients: dict[str, _ClientShare] = {}
        self._released = 0  # bytes let go of since the heap was last trimmed
        self._handshakes = 0  # accepted connections still in their handshake
        self._nursery: trio.Nursery | None = None
        self.listen_address: Address | None = None
        self._server_ctx = self._client_ctx = None
        if self.credentials is not None:
            self._server_ctx = self.credentials.server_context()
            self._client_ctx = self.credentials.client_context()

    async def _secure(self, tcp: trio.SocketStream, server_side: bool) -> trio.abc.Stream:
        """Wrap a fresh TCP stream in TLS 1.3 and finish the TLS handshake (no-op without TLS).

        Raises:
            HandshakeError: the other side has no valid certificate from our CA.
        """
        ctx = self._server_ctx if server_side else self._client_ctx
        if ctx is None:
            return tcp
        stream = trio.SSLStream(tcp, ctx, server_side=server_side, server_hostname=None)
        done = False
        try:
            await stream.do_handshake()
            done = True
            return stream
        except (trio.BrokenResourceError, ssl.SSLError) as exc:
            # Raised below, outside this block: raising here would chain the SSL error, whose
            # traceback holds this frame and the stream, into a cycle.
            why = f"TLS handshake failed: {exc.__cause__ or exc}"
        finally:
            if not done:  # failed or cancelled: this stream goes, free its TLS state now
                _forget_tls(stream)
        raise HandshakeError(why)

    def _check_certificate(self, stream: trio.abc.Stream, hello: m.Hello) -> None:
        """The Hello's name and role must be those the verified certificate grants."""
        if not isinstance(stream, trio.SSLStream):
            return
        try:
            cert_name, cert_role = tls.certificate_identity(stream.getpeercert())
        except ValueError as exc:
            why = f"bad peer certificate: {exc}"  # raised outside the block (see _secure)
        else:
            why = ""
        if why:
            raise HandshakeError(why)
        if not tls.name_allowed(hello.sender, hello.role, cert_name, cert_role):
            raise HandshakeError(
                f"{hello.sender!r} ({hello.role}) presented the certificate of "
                f"{cert_name!r} ({cert_role or 'no role'})"
            )

    async def run(
        self,
        listen: Address | None = None,
        *,
        task_status: trio.TaskStatus[Address | None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until cancelled; ``started`` reports the bound address (port 0 resolved)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            if listen is not None:
                listeners = await trio.open_tcp_listeners(listen.port, host=listen.host)
                sock = listeners[0].socket
                host, port = sock.getsockname()[:2]
                self.listen_address = Address(host, port)
                nursery.start_soon(self._serve, listeners)
            task_status.started(self.listen_address)
            await trio.sleep_forever()

    async def _serve(self, listeners: list[trio.SocketListener]) -> None:
        await trio.serve_listeners(self._accepted, listeners)

    def connection(self, name: str) -> Connection | None:
        conn = self._conns.get(name)
        return conn if conn is not None and not conn.closed else None

    def post(self, dest: str, msg: m.Message) -> bool:
        """Send ``msg`` to ``dest`` over a live connection, dialling one when needed.

        Never blocks. A message to a party that cannot be reached is dropped and counted in
        ``counters.send_failures`` (the protocol above recovers: steals time out, tuples are
        an optimisation, results are recomputed). Returns False when it was dropped at once.
        """
        conn = self.connection(dest)
        if conn is None:
            address = self.resolve(dest)
            if address is None or self._nursery is None:
                self.counters.send_failures += 1
                log.debug("no route to %s; dropped %s", dest, type(msg).__name__)
                return False
            conn = Connection(self, None, outbound=True, within=self._peers_out)
            self._conns[dest] = conn
            self._nursery.start_soon(self._dial, dest, address, conn)
        return conn.post(msg)

    def post_address(self, address: Address, msg: m.Message) -> None:
        """Send to whoever answers at ``address`` (a seed whose name we do not know yet)."""
        if self._nursery is None:
            self.counters.send_failures += 1
            return

        async def go() -> None:
            try:
                conn = await self.dial(address)
            except Exception as exc:  # whatever failed, only this message is lost
                log.debug("cannot reach %s: %s", address, str(exc))
                self.counters.send_failures += 1
                return
            conn.post(msg)

        self._nursery.start_soon(go)

    async def dial(self, address: Address, expect: str | None = None) -> Connection:
        """Open a connection now (clients use this); returns once the handshake is done.

        Raises:
            OSError, HandshakeError: the address does not answer or the handshake failed.
        """
        assert self._nursery is not None, "transport is not running"
        conn = Connection(self, None, outbound=True, within=self._peers_out)
        ready = trio.Event()
        failure: list[BaseException] = []

        async def go() -> None:
            try:
                await self._dial(
                    expect or str(address), address, conn, ready=ready, expect=bool(expect)
                )
            except BaseException as exc:
                if ready.is_set():  # the connection was up: how it ended is not ours to say
                    raise
                failure.append(exc)  # reported to the caller below
                ready.set()
                if not isinstance(exc, Exception):
                    raise

        self._nursery.start_soon(go)
        await ready.wait()
        if failure:
            # Taken out of the list as it is raised: kept there, the exception (whose
            # traceback holds this frame) and the list would hold each other in a cycle.
            raise failure.pop()
        return conn

    async def _dial(
        self,
        dest: str,
        address: Address,
        conn: Connection,
        ready: trio.Event | None = None,
        expect: bool = False,
    ) -> None:
        """Connect ``conn`` to ``dest`` at ``address``. A connection made for a message to a
        member (``ready`` None), or a dial that ``expect``s a name, fails when another party
        answers: after a restart in the same slot the address answers as a new instance, and
        the old one's messages must not reach it (net/names.py)."""
        try:
            with trio.fail_after(self.cfg.connect_timeout_s):
                tcp = await trio.open_tcp_stream(address.host, address.port)
                stream = await self._secure(tcp, server_side=False)
                reader = FrameReader(stream, self.cfg)
                conn.remote = await self._handshake(stream, reader)
                # Only peers listen: whoever we dialled is a member (or a peer, for a client).
                reader.budget = self._peers_in
                if (ready is None or expect) and not answers_to(conn.remote.name, dest):
                    # A member's address now answers under another name (a restart, a
                    # reused port): talking to it as `dest` would misroute everything.
                    raise HandshakeError(f"dialled {dest} but {conn.remote.name} answered")
        except Exception as exc:
            # Refused, unreachable, too slow, a bad handshake, or an address gossip made up (a
            # port out of range): this connection fails, nothing else. Expected while a dead
            # member is being detected: not worth a warning each time.
            log.info("cannot connect to %s at %s: %s", dest, address, str(exc))
            self.counters.send_failures += conn.outbox.frames
            conn.close()
            if self._conns.get(dest) is conn:
                del self._conns[dest]
            self.on_closed(conn)
            if ready is not None:
                raise
            return
        # Register under the name the remote proved, so replies find this connection.
        self._conns.setdefault(conn.remote.name, conn)
        if ready is not None:
            ready.set()
        await self._pump(stream, reader, conn)

    async def _accepted(self, tcp: trio.SocketStream) -> None:
        if self._accepted_open >= self.cfg.max_connections:
            # Refused before the TLS handshake, which is the expensive part for us.
            self.counters.refused_connections += 1
            log.warning(
                "refusing a connection from %s: %d connections open (net.max_connections)",
                _peer_of(tcp),
                self._accepted_open,
            )
            await self._close_stream(tcp)
            return
        self._accepted_open += 1
        try:
            await self._serve_accepted(tcp)
        finally:
            self._accepted_open -= 1
            if not self._clients and not self._handshakes:
                # The last client gone: whatever the clients let go of goes back to the
                # system, however little, so that the peer's RSS returns to where it was.
                self._release(0, settle=True)

    async def _serve_accepted(self, tcp: trio.SocketStream) -> None:
        stream: trio.abc.Stream = tcp
        self._handshakes += 1
        try:
            with trio.fail_after(self.cfg.connect_timeout_s):
                stream = await self._secure(tcp, server_side=True)
                reader = FrameReader(stream, self.cfg)
                remote = await self._handshake(stream, reader)
        except (
            trio.TooSlowError,
            HandshakeError,
            codec.DecodeError,
            OSError,
            trio.BrokenResourceError,
        ) as exc:
            log.warning("rejected connection from %s: %s", _peer_of(tcp), str(exc))
            self.counters.bad_frames += 1
            await self._close_stream(stream)
            self._release(CONNECTION_BYTES)
            return
        finally:
            self._handshakes -= 1
        if remote.role != "client":
            reader.budget = self._peers_in
            conn = Connection(self, remote, outbound=False, within=self._peers_out)
            await self._serve_live(stream, reader, conn)
            return
        client = tls.client_base_name(remote.name)
        share = self._clients.get(client)
        if share is not None and len(share.conns) >= self.cfg.max_client_connections:
            idle = self._idlest(share)
            if idle is None:
                self.counters.refused_connections += 1
                log.warning(
                    "refusing a connection of client %s: its %d connections are all busy "
                    "(net.max_client_connections)",
                    client,
                    len(share.conns),
                )
                bye = m.Bye(
                    "too many connections from this client, none of them idle "
                    "(net.max_client_connections)"
                )
                with trio.move_on_after(self.cfg.close_timeout_s), contextlib.suppress(Exception):
                    await stream.send_all(codec.frame(codec.encode_message(bye)))
                await self._close_stream(stream)
                self._release(CONNECTION_BYTES)
                return
            # Its own idle connections (a script that left them open, a shared certificate)
            # must not lock a client out: the one idle longest makes room.
            log.info(
                "closing a connection of client %s idle for %.0f s: a new one needs its room "
                "(net.max_client_connections)",
                client,
                trio.current_time() - idle.last_received,
            )
            del share.conns[idle]
            idle.close()
        if share is None:
            cfg, whose = self.cfg, f", client {client!r}"
            share = self._clients[client] = _ClientShare(
                ByteBudget(
                    cfg.max_receive_bytes_per_client,
                    "net.max_receive_bytes_per_client" + whose,
                    self._clients_in,
                ),
                ByteBudget(
                    cfg.max_send_bytes_per_client,
                    "net.max_send_bytes_per_client" + whose,
                    self._clients_out,
                ),
            )
        reader.budget = share.received
        conn = Connection(self, remote, outbound=False, within=share.queued)
        share.conns[conn] = reader
        try:
            await self._serve_live(stream, reader, conn)
        finally:
            share.conns.pop(conn, None)
            if not share.conns and self._clients.get(client) is share:
                del self._clients[client]

    def _idlest(self, share: _ClientShare) -> Connection | None:
        """The client's connection idle longest: nothing being answered, written or
        received. None when every one is busy."""
        idle = [
            conn
            for conn, reader in share.conns.items()
            if not conn.outbox and not reader.buffer and not self.busy(conn)
        ]
        return min(idle, key=lambda conn: conn.last_received, default=None)

    async def _serve_live(
        self, stream: trio.abc.Stream, reader: FrameReader, conn: Connection
    ) -> None:
        assert conn.remote is not None
        if self.connection(conn.remote.name) is None:
            self._conns[conn.remote.name] = conn
        await self._pump(stream, reader, conn)

    async def _handshake(self, stream: trio.abc.Stream, reader: FrameReader) -> Identity:
        me = self.identity
        hello = m.Hello(m.PROTOCOL_VERSION, me.name, me.cluster, me.role)
        await stream.send_all(codec.frame(codec.encode_message(hello)))
        body = await reader.read(codec.HELLO_MAX_BYTES)
        if body is None:
            raise HandshakeError("closed during the handshake")
        msg = codec.decode_message(body, self.cfg.max_message_depth, self.cfg.max_items)
        if not isinstance(msg, m.Hello):
            raise HandshakeError(f"expected Hello, got {type(msg).__name__}")
        if msg.version != m.PROTOCOL_VERSION:
            raise HandshakeError(
                f"{codec.describe(msg.sender)} speaks protocol {msg.version}, this peer "
                f"{m.PROTOCOL_VERSION}"
            )
        if msg.role not in ("peer", "client"):
            raise HandshakeError(f"unknown role {codec.describe(msg.role)}")
        self._check_certificate(stream, msg)
        return Identity(msg.sender, msg.cluster, msg.role)

    async def _pump(self, stream: trio.abc.Stream, reader: FrameReader, conn: Connection) -> None:
        """Run a connection's writer and reader until either ends; then forget it."""
        try:
            with conn.cancel_scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._write_loop, stream, conn)
                    await self._read_loop(reader, conn)
                    nursery.cancel_scope.cancel()
        finally:
            conn.closed = True
            conn._drop_outbox()
            if self._conns.get(conn.remote_name) is conn:
                del self._conns[conn.remote_name]
            with trio.CancelScope(shield=True):
                await self._close_stream(stream)
            self.on_closed(conn)
            self._release(CONNECTION_BYTES + max(conn.outbox.peak, reader.peak))

    def _release(self, size: int, settle: bool = False) -> None:
        """``size`` bytes were just let go of (a closed connection's, a large frame's): once
        net.trim_after_bytes have been (with ``settle``: any), hand the heap's free memory
        back to the system (satind/heap.py). Freed in small pieces among pieces still in
        use, it would stay in the peer's RSS for good."""
        limit = self.cfg.trim_after_bytes
        if limit <= 0:
            return
        self._released += size
        if self._released >= limit or (settle and self._released):
            self._released = 0
            heap.trim()

    async def _close_stream(self, stream: trio.abc.Stream) -> None:
        """Close a stream within ``close_timeout_s`` and free its TLS state now.

        trio's SSLStream refers to itself through its handshake latch (``_Once`` holding the
        bound ``_do_handshake``), so it, its OpenSSL object and buffers (about 20 KB) are
        freed by the cyclic collector only — and a peer process runs that seldom
        (engine.gc_young_threshold): thousands of closed connections stayed in memory.
        Dropping the latch once the stream is closed breaks the cycle.
        """
        with trio.move_on_after(self.cfg.close_timeout_s):
            await trio.aclose_forcefully(stream)
        if isinstance(stream, trio.SSLStream):
            _forget_tls(stream)

    async def _write_loop(self, stream: trio.abc.Stream, conn: Connection) -> None:
        counters = self.counters
        # Counted here, once the handshake has told us the remote's cluster.
        assert conn.remote is not None
        wide = conn.remote.role == "peer" and conn.remote.cluster != self.identity.cluster
        emulate = wide and (self.emulation.latency_ms > 0 or self.emulation.bandwidth_mbps > 0)
        latency = self.emulation.latency_ms / 1000
        rate = self.emulation.bandwidth_mbps * 1e6
        try:
            while True:
                await conn.wakeup.wait()
                conn.wakeup = trio.Event()
                while conn.outbox:
                    item = conn.outbox.take()
                    if emulate:
                        # Wide-area emulation: each frame leaves `latency` after it was
                        # posted, and the connection is paced to the bandwidth.
                        await trio.sleep_until(item.posted + latency)
                    if wide:
                        counters.messages_wide += item.frames
                        counters.bytes_wide += len(item.data)
                    else:
                        counters.messages_local += item.frames
                        counters.bytes_local += len(item.data)
                    await stream.send_all(item.data)
                    conn.outbox.written(item)
                    if emulate and rate > 0:
                        await trio.sleep(len(item.data) / rate)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.debug("write to %s failed: %s", conn.remote_name, str(exc))
            conn.cancel_scope.cancel()

    async def _read_loop(self, reader: FrameReader, conn: Connection) -> None:
        counters = self.counters
        try:
            while True:
                body = await reader.read()
                if body is None:
                    return
                size = len(body)
                conn.last_received = trio.current_time()
                counters.messages_received += 1
                counters.bytes_received += size + 4
                handled = handle_frame(body, conn, self.on_message, self.cfg, counters)
                del body  # before trimming: the frame's bytes are what may be handed back
                if size >= self.cfg.trim_after_bytes:
                    self._release(size)
                if not handled:
                    return
        except codec.DecodeError as exc:  # from the reader: a frame over a cap, or too slow
            counters.bad_frames += 1
            log.warning("closing connection from %s: %s", conn.remote_name, str(exc))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.debug("connection to %s lost: %s", conn.remote_name, str(exc))

    def close_all(self) -> None:
        for conn in list(self._conns.values()):
            conn.close()


def _forget_tls(stream: trio.SSLStream[Any]) -> None:
    """Break the cycle through a finished SSLStream's handshake latch (see _close_stream)."""
    vars(stream).pop("_handshook", None)


def _peer_of(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "?"
