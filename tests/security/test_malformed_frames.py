"""Hypothesis-generated garbage sent to a real peer over an authenticated TLS connection:
random bytes, truncated CBOR, wrong types, huge length prefixes, deep nesting. Each costs only
its own connection; the peer keeps serving."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cbor2
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from satind import config
from satind.net import codec, tls
from satind.net import messages as m
from satind.net.transport import Address
from satind.peer import Peer, PeerOptions


@dataclass
class LivePeer:
    peer: Peer
    address: Address
    keys: Path


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LivePeer]:
    keys = tmp_path_factory.mktemp("keys")
    tls.init_ca(keys)
    tls.issue(keys, "tp")
    tls.issue(keys, "client", client=True)
    cfg = config.DEFAULT
    ready = threading.Event()
    box: dict[str, object] = {}

    async def main() -> None:
        peer = Peer(
            cfg, PeerOptions(name="tp/0", credentials=tls.Credentials.load(keys, "tp", "peer"))
        )
        box["token"] = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            box["address"] = await nursery.start(peer.run)
            box["peer"] = peer
            ready.set()
            await peer.stopped.wait()
            nursery.cancel_scope.cancel()

    thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
    thread.start()
    assert ready.wait(30)
    peer = box["peer"]
    assert isinstance(peer, Peer)
    address = box["address"]
    assert isinstance(address, Address)
    yield LivePeer(peer, address, keys)
    trio.from_thread.run_sync(peer.stop, trio_token=box["token"])  # type: ignore[arg-type]
    thread.join(30)


def _tls_client(live: LivePeer) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(live.keys / "ca.pem"))
    ctx.check_hostname = False
    ctx.load_cert_chain(str(live.keys / "client.pem"), str(live.keys / "client.key"))
    raw = socket.create_connection((live.address.host, live.address.port), timeout=10)
    sock = ctx.wrap_socket(raw)
    hello = m.Hello(m.PROTOCOL_VERSION, "client~fuzz", "", "client")
    sock.sendall(codec.frame(codec.encode_message(hello)))
    return sock


def _closed_by_peer(sock: ssl.SSLSocket) -> bool:
    """Read until the peer closes (its Hello comes first); False if it keeps the line open."""
    sock.settimeout(10)
    try:
        while sock.recv(65536):
            pass
    except (ConnectionResetError, ssl.SSLError, BrokenPipeError):
        pass
    except TimeoutError:
        return False
    return True


def _send(live: LivePeer, data: bytes) -> bool:
    with _tls_client(live) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            return True
        return _closed_by_peer(sock)


def _framed(body: bytes) -> bytes:
    return codec.FRAME_HEADER.pack(len(body)) + body


valid_bodies = st.sampled_from(
    [
        codec.encode_message(m.StatusRequest(1, False)),
        codec.encode_message(m.Submit(2, "fib", ["10"])),
        codec.encode_message(m.ResultRequest(3, "x", False)),
    ]
)
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.floats(allow_nan=False),
)
type_codes = st.sampled_from([c.TYPE for c in m.MESSAGE_TYPES] + [9999, -1])

garbage = st.one_of(
    # random bytes in a well-formed frame (that is not valid CBOR of a valid message)
    st.binary(min_size=1, max_size=300).map(_framed),
    # a huge length prefix
    st.integers(min_value=64 * 1024 * 1024 + 1, max_value=2**32 - 1).map(
        lambda n: codec.FRAME_HEADER.pack(n) + b"\x00" * 16
    ),
    # truncated CBOR of a real message
    st.tuples(valid_bodies, st.integers(min_value=1, max_value=30)).map(
        lambda t: _framed(t[0][: max(1, len(t[0]) - t[1])])
    ),
    # a real type code with fields of the wrong types
    st.tuples(
        type_codes,
        st.dictionaries(
            st.sampled_from(["req", "run_id", "plugin", "argv", "deep", "wait", "x"]),
            junk,
            max_size=4,
        ),
    ).map(lambda t: _framed(cbor2.dumps({"t": t[0], **t[1]}))),
    # deep nesting
    st.integers(min_value=250, max_value=3000).map(
        lambda d: _framed(b"\xa2\x61t\x18\x3c\x63req" + b"\x81" * d + b"\x00")
    ),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=garbage)
def test_garbage_costs_only_its_connection(live: LivePeer, data: bytes) -> None:
    try:
        codec.decode_message(data[4:])
        if len(data) - 4 == codec.FRAME_HEADER.unpack(data[:4])[0]:
            return  # hypothesis built a valid message by chance: nothing to test
    except codec.DecodeError:
        pass
    assert _send(live, data), "the peer kept a connection that sent garbage"


def test_the_peer_still_serves_after_the_garbage(live: LivePeer) -> None:
    with _tls_client(live) as sock:
        sock.sendall(codec.frame(codec.encode_message(m.StatusRequest(7, False))))
        sock.settimeout(10)
        buffer = b""
        replies = []
        while len(replies) < 2:  # its Hello, then the status
            buffer += sock.recv(65536)
            while len(buffer) >= 4 and len(buffer) >= 4 + codec.FRAME_HEADER.unpack(buffer[:4])[0]:
                n = codec.FRAME_HEADER.unpack(buffer[:4])[0]
                replies.append(codec.decode_message(buffer[4 : 4 + n]))
                buffer = buffer[4 + n :]
    assert isinstance(replies[1], m.StatusReply) and replies[1].peers[0].name == "tp/0"
    assert live.peer.transport.counters.bad_frames >= 1
