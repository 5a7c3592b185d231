"""The stream under a TCP connection, from its first byte to its last: the TLS 1.3 handshake,
the Hello exchange that names the remote party (checked against its certificate), and a close
that frees the TLS state at once.

A connection starts with a Hello in each direction: the protocol versions must match, and the
Hello names the remote party, its cluster and its role. With TLS, the name and role must be
those the verified certificate grants (tls.py). Whatever fails here raises ``HandshakeError``
(or the stream's own errors), which costs the transport that one connection.

These are functions of a stream, not of the transport: the transport (transport.py) bounds
them by ``connect_timeout_s`` and decides what a failure costs.
"""

from __future__ import annotations

import ssl
from typing import Any

import trio

from satind.config import NetConfig
from satind.net import codec, tls
from satind.net import messages as m
from satind.net.framing import FrameReader
from satind.net.parties import Identity


class HandshakeError(Exception):
    pass


async def secure(
    tcp: trio.SocketStream, ctx: ssl.SSLContext | None, server_side: bool
) -> trio.abc.Stream:
    """Wrap a fresh TCP stream in TLS 1.3 and finish the TLS handshake (no-op without TLS,
    ``ctx`` None).

    Raises:
        HandshakeError: the other side has no valid certificate from our CA.
    """
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
            forget_tls(stream)
    raise HandshakeError(why)


def check_certificate(stream: trio.abc.Stream, hello: m.Hello) -> frozenset[str]:
    """The Hello's name and role must be those the verified certificate grants; returns what
    the certificate allows a client (every grant without TLS)."""
    if not isinstance(stream, trio.SSLStream):
        return frozenset(tls.GRANTS)
    try:
        cert_name, cert_role, grants = tls.certificate_identity(stream.getpeercert())
    except ValueError as exc:
        why = f"bad peer certificate: {exc}"  # raised outside the block (see secure)
    else:
        why = ""
    if why:
        raise HandshakeError(why)
    if not tls.name_allowed(hello.sender, hello.role, cert_name, cert_role):
        raise HandshakeError(
            f"{hello.sender!r} ({hello.role}) presented the certificate of "
            f"{cert_name!r} ({cert_role or 'no role'})"
        )
    return grants


async def exchange_hellos(
    stream: trio.abc.Stream, reader: FrameReader, me: Identity, cfg: NetConfig
) -> Identity:
    """Send our Hello, read theirs (at most ``codec.HELLO_MAX_BYTES``) and return who the
    remote party proved to be.

    Raises:
        HandshakeError: closed, not a Hello, another protocol version, an unknown role, or a
            name the certificate does not grant.
        DecodeError: the Hello is malformed or over its cap.
    """
    hello = m.Hello(m.PROTOCOL_VERSION, me.name, me.cluster, me.role)
    await stream.send_all(codec.frame(codec.encode_message(hello)))
    body = await reader.read(codec.HELLO_MAX_BYTES)
    if body is None:
        raise HandshakeError("closed during the handshake")
    msg = codec.decode_message(body, cfg.max_message_depth, cfg.max_items)
    if not isinstance(msg, m.Hello):
        raise HandshakeError(f"expected Hello, got {type(msg).__name__}")
    if msg.version != m.PROTOCOL_VERSION:
        raise HandshakeError(
            f"{codec.describe(msg.sender)} speaks protocol {msg.version}, this peer "
            f"{m.PROTOCOL_VERSION}"
        )
    if msg.role not in ("peer", "client"):
        raise HandshakeError(f"unknown role {codec.describe(msg.role)}")
    grants = check_certificate(stream, msg)
    return Identity(
        msg.sender, msg.cluster, msg.role, grants if msg.role == "client" else frozenset()
    )


async def close_stream(stream: trio.abc.Stream, timeout_s: float) -> None:
    """Close a stream within ``timeout_s`` (net.close_timeout_s) and free its TLS state now.

    trio's SSLStream refers to itself through its handshake latch (``_Once`` holding the
    bound ``_do_handshake``), so it, its OpenSSL object and buffers (about 20 KB) are
    freed by the cyclic collector only — and a peer process runs that seldom
    (engine.gc_young_threshold): thousands of closed connections stayed in memory.
    Dropping the latch once the stream is closed breaks the cycle.
    """
    with trio.move_on_after(timeout_s):
        await trio.aclose_forcefully(stream)
    if isinstance(stream, trio.SSLStream):
        forget_tls(stream)


def forget_tls(stream: trio.SSLStream[Any]) -> None:
    """Break the cycle through a finished SSLStream's handshake latch (see close_stream)."""
    vars(stream).pop("_handshook", None)
