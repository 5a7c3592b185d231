"""One live TCP connection to a remote party: its outbox, and the two loops that move its frames.

``post`` queues a framed message and never blocks; the writer loop drains the outbox, counts the
traffic (local or wide-area, by the remote's cluster) and, between clusters, emulates the
wide-area network when ``[emulation]`` says so; the reader loop reads frames within their
budget and hands each to ``framing.handle_frame``, which dispatches it or says to close.

What a connection may hold is bounded: a message over ``max_frame_bytes`` is not sent, and an
outbox over its budget (``max_outbox_bytes``, within the budget of the remote's kind) closes the
connection rather than grow. The transport (transport.py) opens connections, keeps the one per
remote party, runs both loops and forgets the connection when either ends.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

import trio

from satind.config import EmulationConfig, NetConfig
from satind.net import codec
from satind.net import messages as m
from satind.net.framing import ByteBudget, FrameReader, handle_frame
from satind.net.outbox import Outbox
from satind.net.parties import Identity, TrafficCounters

# The transport's logger: a connection's failures are the transport's to report.
log = logging.getLogger("satind.net.transport")

# bytes. A frame larger than this is written in slices of it (views, not copies): a TLS stream
# encrypts all it is given into its outgoing buffer before it sends any, so a 40 MiB result
# cost the sender another 40 MiB at once.
SEND_CHUNK = 1024 * 1024


# bytes. What a connection costs the peer besides its frames and queue (its TLS state and
# buffers, its tasks): about 22 KB measured (benchmarks/hostile.py, churn). Counted as let go
# of when it closes (net.trim_after_bytes).
CONNECTION_BYTES = 24 * 1024


class Owner(Protocol):
    """What a connection needs of the transport that opened or accepted it."""

    @property
    def identity(self) -> Identity: ...

    @property
    def cfg(self) -> NetConfig: ...

    @property
    def emulation(self) -> EmulationConfig: ...

    @property
    def counters(self) -> TrafficCounters: ...

    @property
    def on_message(self) -> MessageHandler: ...

    def release(self, size: int, settle: bool = False) -> None: ...


class Connection:
    """One live link to a remote party, with an outbox drained by its writer task."""

    def __init__(
        self,
        transport: Owner,
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
        # The bandwidth sample of the frame being handled (``Link.measured``).
        self.measured: tuple[int, float] | None = None

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

    async def write_loop(self, stream: trio.abc.Stream) -> None:
        """Write what is posted, in order, until the stream fails (which cancels the
        connection) or the connection is cancelled."""
        transport = self.transport
        counters = transport.counters
        # Counted here, once the handshake has told us the remote's cluster.
        assert self.remote is not None
        wide = self.remote.role == "peer" and self.remote.cluster != transport.identity.cluster
        emulation = transport.emulation
        emulate = wide and (emulation.latency_ms > 0 or emulation.bandwidth_mbps > 0)
        latency = emulation.latency_ms / 1000
        rate = emulation.bandwidth_mbps * 1e6
        try:
            while True:
                await self.wakeup.wait()
                self.wakeup = trio.Event()
                while self.outbox:
                    item = self.outbox.take()
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
                    data = item.data
                    if len(data) <= SEND_CHUNK:
                        await stream.send_all(data)
                    else:
                        view = memoryview(data)
                        for start in range(0, len(data), SEND_CHUNK):
                            await stream.send_all(view[start : start + SEND_CHUNK])
                    self.outbox.written(item)
                    if emulate and rate > 0:
                        await trio.sleep(len(item.data) / rate)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.debug("write to %s failed: %s", self.remote_name, str(exc))
            self.cancel_scope.cancel()

    async def read_loop(self, reader: FrameReader) -> None:
        """Read and dispatch frames until the remote closes, a frame is refused or the
        stream fails; returns then (the caller closes the connection)."""
        transport = self.transport
        counters = transport.counters
        try:
            while True:
                body = await reader.read()
                if body is None:
                    return
                size = len(body)
                self.last_received = trio.current_time()
                counters.messages_received += 1
                counters.bytes_received += size + 4
                self.measured = reader.measured
                handled = handle_frame(body, self, transport.on_message, transport.cfg, counters)
                del body  # before trimming: the frame's bytes are what may be handed back
                if size >= transport.cfg.trim_after_bytes:
                    transport.release(size)
                if not handled:
                    return
        except codec.DecodeError as exc:  # from the reader: a frame over a cap, or too slow
            counters.bad_frames += 1
            log.warning("closing connection from %s: %s", self.remote_name, str(exc))
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.debug("connection to %s lost: %s", self.remote_name, str(exc))


MessageHandler = Callable[[Connection, m.Message], None]
