"""The little of HTTP/1.0 that a peer's endpoints need (node/metrics.py, node/dashboard.py):
read a bounded request head, write an answer. A peer serves a few local readers (a scraper,
a browser), so a minimal responder on trio, in the peer's own thread, beats a web framework
in a thread of its own that would read the peer's state while the trio thread changes it.
"""

from __future__ import annotations

from collections.abc import Sequence

import trio

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    503: "Service Unavailable",
}


def answer(
    status: int,
    content_type: str,
    body: bytes,
    head_only: bool = False,
    headers: Sequence[tuple[str, str]] = (),
) -> bytes:
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers)
    header = (
        f"HTTP/1.0 {status} {REASONS[status]}\r\n"
        f"Content-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"{extra}"
        "Connection: close\r\n\r\n"
    ).encode("latin-1")
    return header if head_only else header + body


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
