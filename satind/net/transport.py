"""The TCP/TLS transport: messages to named parties over framed, authenticated connections.

Peers talk in messages, not bytes: ``post(dest, msg)`` queues a message for a peer (or a
connected client) and never blocks; incoming messages go to one ``on_message(conn, msg)``
callback, which is synchronous (the decision code is sans-I/O; it spawns tasks when it has
to wait). The TCP transport keeps at most one live connection per remote party and reuses a
connection the other side opened, dials on first use, frames messages (codec.py), and closes a
connection — only that one — on anything malformed.

A connection starts with a Hello in each direction inside ``connect_timeout_s``: the protocol
versions must match, and the Hello names the remote party and its cluster (with TLS, the name
is checked against the certificate). The handshake and the closing of a stream are
handshake.py's; a live connection, its outbox and the loops that move its frames are
connection.py's. This module keeps the connections: it dials, accepts within the caps and
budgets below, keeps one connection per remote party and forgets each when it ends.

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
import socket
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

import satind.heap as heap
from satind.config import EmulationConfig, NetConfig
from satind.net import codec, handshake, tls
from satind.net import messages as m
from satind.net.connection import CONNECTION_BYTES, MessageHandler
from satind.net.connection import Connection as Connection
from satind.net.framing import ByteBudget, FrameReader
from satind.net.framing import handle_frame as handle_frame
from satind.net.handshake import HandshakeError as HandshakeError
from satind.net.names import answers_to
from satind.net.parties import Address as Address
from satind.net.parties import Identity as Identity
from satind.net.parties import Link as Link
from satind.net.parties import TrafficCounters as TrafficCounters
from satind.net.parties import parse_address as parse_address

log = logging.getLogger(__name__)


def tune(stream: trio.abc.Stream, cfg: NetConfig) -> None:
    """Give up a connection whose sent data the other side does not acknowledge within
    ``net.tcp_user_timeout_s`` (a cut link), where the kernel can."""
    option = getattr(socket, "TCP_USER_TIMEOUT", None)
    if option is None or cfg.tcp_user_timeout_s <= 0 or not isinstance(stream, trio.SocketStream):
        return  # a test's in-memory stream has no socket to tune
    with contextlib.suppress(OSError):  # not TCP (a Unix socket), or refused: the default
        stream.setsockopt(socket.IPPROTO_TCP, option, int(cfg.tcp_user_timeout_s * 1000))


@dataclass
class _ClientShare:
    """What one client certificate holds on this peer, over all its connections; it goes
    with its last connection."""

    received: ByteBudget
    queued: ByteBudget
    # Its live connections, each with its reader.
    conns: dict[Connection, FrameReader] = field(default_factory=dict)


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
    # A dial of a member (address, the name dialled) answered under another name: told to
    # the failure detector, for it may be that slot's restarted process
    # (membership/rejoin.py).
    on_other_answered: Callable[[Address, str, str], None] = lambda address, dest, name: None

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

    def post_address(self, address: Address, msg: m.Message, quiet: bool = False) -> None:
        """Send to whoever answers at ``address`` (a seed whose name we do not know yet).
        ``quiet``: a failed dial is logged at DEBUG only."""
        if self._nursery is None:
            self.counters.send_failures += 1
            return

        async def go() -> None:
            try:
                conn = await self.dial(address, quiet=quiet)
            except Exception as exc:  # whatever failed, only this message is lost
                log.debug("cannot reach %s: %s", address, str(exc))
                self.counters.send_failures += 1
                return
            conn.post(msg)

        self._nursery.start_soon(go)

    async def dial(
        self, address: Address, expect: str | None = None, quiet: bool = False
    ) -> Connection:
        """Open a connection now (clients use this); returns once the handshake is done.
        ``quiet``: a failure is logged at DEBUG, not INFO.

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
                    expect or str(address),
                    address,
                    conn,
                    ready=ready,
                    expect=bool(expect),
                    quiet=quiet,
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
        quiet: bool = False,
    ) -> None:
        """Connect ``conn`` to ``dest`` at ``address``. A connection made for a message to a
        member (``ready`` None), or a dial that ``expect``s a name, fails when another party
        answers: after a restart in the same slot the address answers as a new instance, and
        the old one's messages must not reach it (net/names.py)."""
        stream: trio.abc.Stream | None = None
        try:
            with trio.fail_after(self.cfg.connect_timeout_s):
                stream = await trio.open_tcp_stream(address.host, address.port)
                tune(stream, self.cfg)
                stream = await handshake.secure(stream, self._client_ctx, server_side=False)
                reader = FrameReader(stream, self.cfg)
                conn.remote = await handshake.exchange_hellos(
                    stream, reader, self.identity, self.cfg
                )
                # Only peers listen: whoever we dialled is a member (or a peer, for a client).
                reader.budget = self._peers_in
                if (ready is None or expect) and not answers_to(conn.remote.name, dest):
                    # A member's address now answers under another name (a restart, a
                    # reused port): talking to it as `dest` would misroute everything. The
                    # failure detector hears of it: a restarted process is news.
                    self.on_other_answered(address, dest, conn.remote.name)
                    raise HandshakeError(f"dialled {dest} but {conn.remote.name} answered")
        except Exception as exc:
            # Refused, unreachable, too slow, a bad handshake, or an address gossip made up (a
            # port out of range): this connection fails, nothing else. Expected while a dead
            # member is being detected: not worth a warning each time.
            level = logging.DEBUG if quiet else logging.INFO
            log.log(level, "cannot connect to %s at %s: %s", dest, address, str(exc))
            self.counters.send_failures += conn.outbox.frames
            conn.close()
            if self._conns.get(dest) is conn:
                del self._conns[dest]
            self.on_closed(conn)
            if stream is not None:
                # Closed now, not when the cyclic collector gets to it (handshake.close_stream):
                # the party that answered under another name (a restarted slot's new instance)
                # has finished its side of the handshake and took this for its live connection
                # to us. Left open, all it sent us here went unread until the collector reset
                # the socket (17 s once): a run stalled on the answers.
                with trio.CancelScope(shield=True):
                    await handshake.close_stream(stream, self.cfg.close_timeout_s)
            if ready is not None:
                raise
            return
        # Register under the name the remote proved, so replies find this connection.
        self._conns.setdefault(conn.remote.name, conn)
        if ready is not None:
            ready.set()
        await self._pump(stream, reader, conn)

    async def _accepted(self, tcp: trio.SocketStream) -> None:
        tune(tcp, self.cfg)
        if self._accepted_open >= self.cfg.max_connections:
            # Refused before the TLS handshake, which is the expensive part for us.
            self.counters.refused_connections += 1
            log.warning(
                "refusing a connection from %s: %d connections open (net.max_connections)",
                _peer_of(tcp),
                self._accepted_open,
            )
            await handshake.close_stream(tcp, self.cfg.close_timeout_s)
            return
        self._accepted_open += 1
        try:
            await self._serve_accepted(tcp)
        finally:
            self._accepted_open -= 1
            if not self._clients and not self._handshakes:
                # The last client gone: whatever the clients let go of goes back to the
                # system, however little, so that the peer's RSS returns to where it was.
                self.release(0, settle=True)

    async def _serve_accepted(self, tcp: trio.SocketStream) -> None:
        stream: trio.abc.Stream = tcp
        self._handshakes += 1
        try:
            with trio.fail_after(self.cfg.connect_timeout_s):
                stream = await handshake.secure(tcp, self._server_ctx, server_side=True)
                reader = FrameReader(stream, self.cfg)
                remote = await handshake.exchange_hellos(stream, reader, self.identity, self.cfg)
        except (
            trio.TooSlowError,
            HandshakeError,
            codec.DecodeError,
            OSError,
            trio.BrokenResourceError,
        ) as exc:
            log.warning("rejected connection from %s: %s", _peer_of(tcp), str(exc))
            self.counters.bad_frames += 1
            await handshake.close_stream(stream, self.cfg.close_timeout_s)
            self.release(CONNECTION_BYTES)
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
                await handshake.close_stream(stream, self.cfg.close_timeout_s)
                self.release(CONNECTION_BYTES)
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

    async def _pump(self, stream: trio.abc.Stream, reader: FrameReader, conn: Connection) -> None:
        """Run a connection's writer and reader until either ends; then forget it."""
        try:
            with conn.cancel_scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(conn.write_loop, stream)
                    await conn.read_loop(reader)
                    nursery.cancel_scope.cancel()
        finally:
            conn.closed = True
            conn._drop_outbox()
            if self._conns.get(conn.remote_name) is conn:
                del self._conns[conn.remote_name]
            with trio.CancelScope(shield=True):
                await handshake.close_stream(stream, self.cfg.close_timeout_s)
            self.on_closed(conn)
            self.release(CONNECTION_BYTES + max(conn.outbox.peak, reader.peak))

    def release(self, size: int, settle: bool = False) -> None:
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

    def close_all(self) -> None:
        for conn in list(self._conns.values()):
            conn.close()


def _peer_of(stream: trio.SocketStream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "?"
