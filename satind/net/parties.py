"""Who talks over the wire, as the core and membership see it: addresses, identities, traffic
counters and the ``Link`` a message came on. Plain data and a protocol, no trio, no socket and
no logging, so that the core's import closure holds no I/O (docs/architecture.md); the
transports (framing.py, transport.py, memory.py) build on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from satind.net import messages as m


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_address(text: str) -> Address:
    """ "HOST:PORT" (IPv6 hosts in brackets).

    Raises:
        ValueError: not of that form.
    """
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return Address(host.strip("[]"), int(port))


@dataclass(frozen=True)
class Identity:
    """Who this end of a connection is."""

    name: str
    cluster: str
    role: str  # "peer" or "client"
    # What a client's certificate allows (tls.GRANTS); without TLS, nothing is checked and a
    # client may do everything.
    grants: frozenset[str] = frozenset()


@dataclass
class TrafficCounters:
    """What crossed the wire, split by whether the other end is in our cluster."""

    messages_local: int = 0
    messages_wide: int = 0
    bytes_local: int = 0
    bytes_wide: int = 0
    messages_received: int = 0
    bytes_received: int = 0
    # Frames that closed their connection: malformed, over a cap, or failed in dispatch.
    bad_frames: int = 0
    send_failures: int = 0
    # Connections closed because their reader did not keep up (max_outbox_bytes,
    # max_send_bytes), and connections refused at accept (max_connections,
    # max_client_connections).
    outbox_overflows: int = 0
    refused_connections: int = 0

    @property
    def messages(self) -> int:
        return self.messages_local + self.messages_wide

    @property
    def bytes(self) -> int:
        return self.bytes_local + self.bytes_wide


class Link(Protocol):
    """The connection a message came on, as a handler sees it: who sent it, and how to answer
    on the same connection (a TCP Connection, or the in-memory network's link)."""

    @property
    def remote_name(self) -> str: ...

    @property
    def remote(self) -> Identity | None: ...

    @property
    def measured(self) -> tuple[int, float] | None:
        """The bandwidth sample of the frame this message came in (``FrameReader``), or
        None."""
        ...

    def post(self, msg: m.Message) -> bool: ...

    def close(self) -> None: ...
