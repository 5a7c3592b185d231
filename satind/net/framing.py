"""What every transport shares: the reception of frames — reading one within its deadline and
budget (``FrameReader``), and turning it into a dispatched message or a closed connection
(``handle_frame``). The TCP/TLS transport (``transport.py``) and the in-memory one
(``memory.py``) both build on it; the types they share with the core (addresses, identities,
traffic counters, the ``Link`` a handler answers on) are parties.py's, which loads no trio.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio

from satind.config import NetConfig
from satind.net import codec
from satind.net import messages as m
from satind.net.parties import Link, TrafficCounters

log = logging.getLogger("satind.net.transport")


def handle_frame(
    body: bytes,
    link: Link,
    handler: Callable[[Any, m.Message], None],
    cfg: NetConfig,
    counters: TrafficCounters,
) -> bool:
    """Decode, validate and dispatch one received frame: the one place where whatever goes
    wrong with a frame — not CBOR, over a cap, a wrong field, a handler that raises — is
    turned into "close this connection, count it, log it". Both transports use it.

    Returns False when the connection must close (a Bye, or a failure).
    """
    try:
        msg = codec.decode_message(body, cfg.max_message_depth, cfg.max_items)
        if isinstance(msg, m.Bye):
            log.debug("%s closed the connection: %s", link.remote_name, codec.describe(msg.reason))
            return False
        handler(link, msg)
    except codec.DecodeError as exc:
        counters.bad_frames += 1
        log.warning("closing connection from %s: %s", link.remote_name, str(exc))
        return False
    except Exception as exc:
        # A message that passed validation and still made its handler raise: a bug on our
        # side or a case nobody thought of. Either way it must not take the peer down.
        counters.bad_frames += 1
        log.error(
            "closing connection from %s: handling its %s failed",
            link.remote_name,
            type(msg).__name__ if "msg" in locals() else "frame",
            exc_info=exc,
        )
        return False
    return True


class ByteBudget:
    """Bytes a party may hold in a peer's memory — frames being received from it, or
    messages waiting to be written to it. A budget may sit within another (one client's
    within all clients'): a charge counts in both, and is refused when either would go over.
    """

    def __init__(self, limit: int, setting: str, within: ByteBudget | None = None) -> None:
        self.limit = limit
        # What to tell an operator: the setting, and whose budget it is.
        self.setting = setting
        self.within = within
        self.used = 0

    def refuses(self, size: int) -> ByteBudget | None:
        """The budget (this one or one it is within) that ``size`` more bytes would put over
        its limit; None when they fit."""
        budget: ByteBudget | None = self
        while budget is not None:
            if budget.used + size > budget.limit:
                return budget
            budget = budget.within
        return None

    def take(self, size: int) -> bool:
        if self.refuses(size) is not None:
            return False
        budget: ByteBudget | None = self
        while budget is not None:
            budget.used += size
            budget = budget.within
        return True

    def give_back(self, size: int) -> None:
        budget: ByteBudget | None = self
        while budget is not None:
            budget.used -= size
            budget = budget.within


class FrameReader:
    """Frames off a stream, each within its deadline and ``max_frame_bytes``.

    What it holds — the bytes that actually arrived, never the length a header declares — is
    charged to ``budget`` while a read is in progress: a header declaring 64 MiB costs four
    bytes until the rest comes, so stalled headers cannot use up a budget that others need.
    The budget is set once the handshake has said whose it is (None meanwhile: the Hello is
    read under a cap of its own).
    """

    def __init__(
        self, stream: trio.abc.ReceiveStream, cfg: NetConfig, budget: ByteBudget | None = None
    ) -> None:
        self.stream = stream
        self.cfg = cfg
        self.budget = budget
        self.buffer = bytearray()
        self._charged = 0  # bytes of the buffer charged to the budget during this read
        self.peak = 0  # the most it held at once (net.trim_after_bytes)
        # The last frame's bandwidth sample: (bytes that came after its header was read,
        # seconds they took), or None when it came in too few bytes to say
        # (net.bandwidth_sample_bytes).
        self.measured: tuple[int, float] | None = None

    def _charge(self, size: int, length: int | None) -> None:
        budget = self.budget
        if budget is None or not size:
            return
        full = budget.refuses(size)
        if full is not None:
            frame = f"a frame of {length} bytes" if length is not None else "a frame"
            raise codec.DecodeError(
                f"{frame}: {len(self.buffer) + size} bytes came while {full.used} bytes of "
                f"frames are being received ({full.setting} {full.limit})"
            )
        budget.take(size)
        self._charged += size
        self.peak = max(self.peak, self._charged)

    async def _fill(self, n: int, length: int | None) -> bool:
        while len(self.buffer) < n:
            chunk = await self.stream.receive_some(min(max(n - len(self.buffer), 65536), 1 << 20))
            if not chunk:
                if self.buffer:
                    raise codec.DecodeError(
                        f"connection closed inside a frame ({len(self.buffer)} bytes pending)"
                    )
                return False
            self._charge(len(chunk), length)
            self.buffer += chunk
        return True

    async def read(self, max_length: int | None = None) -> bytes | None:
        """The next frame's body, or None at a clean end of stream. ``max_length``: a lower
        cap than ``max_frame_bytes`` (the Hello's, before the remote has said who it is).

        Raises:
            DecodeError: the frame is over a cap, does not arrive in time, or its bytes go
                over the budget.
        """
        try:
            # What came after the previous frame (at most one receive's worth) is held again.
            self._charge(len(self.buffer), None)
            return await self._read(max_length)
        finally:
            if self._charged:
                assert self.budget is not None
                self.budget.give_back(self._charged)
                self._charged = 0

    async def _read(self, max_length: int | None) -> bytes | None:
        if not await self._fill(4, None):
            return None
        (length,) = codec.FRAME_HEADER.unpack_from(self.buffer)
        cfg = self.cfg
        if max_length is not None and length > max_length:
            raise codec.DecodeError(f"frame of {length} bytes where at most {max_length} fit")
        if length > cfg.max_frame_bytes:
            raise codec.DecodeError(
                f"frame of {length} bytes exceeds the cap of {cfg.max_frame_bytes} "
                "(net.max_frame_bytes)"
            )
        allowed = cfg.read_timeout_s + length / cfg.min_receive_rate
        pending = 4 + length - len(self.buffer)
        started = trio.current_time()
        with trio.move_on_after(allowed) as scope:
            complete = await self._fill(4 + length, length)
        self.measured = None
        if pending >= cfg.bandwidth_sample_bytes > 0:
            self.measured = (pending, trio.current_time() - started)
        if scope.cancelled_caught:
            raise codec.DecodeError(
                f"frame of {length} bytes not complete after {allowed:.0f} s "
                f"({len(self.buffer) - 4} bytes came; net.read_timeout_s, "
                "net.min_receive_rate)"
            )
        if not complete:
            raise codec.DecodeError("connection closed inside a frame")
        # One copy out of the buffer (a slice of a bytearray would copy twice).
        body = bytes(memoryview(self.buffer)[4 : 4 + length])
        # A new buffer for what follows: the old one, as large as the frame, goes.
        self.buffer = self.buffer[4 + length :]
        return body
