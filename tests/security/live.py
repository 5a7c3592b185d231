"""A real peer in a thread of the test process, and a TLS client that talks raw frames to it:
what the security tests attack."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio

from satind import config
from satind.net import codec, tls
from satind.net import messages as m
from satind.net.transport import Address
from satind.node.peer import Peer, PeerOptions


@dataclass
class LivePeer:
    peer: Peer
    address: Address
    keys: Path
    thread: threading.Thread


@contextmanager
def peer_in_thread(cfg: config.Config, keys: Path) -> Iterator[LivePeer]:
    """A peer "tp/0" with ``cfg`` and the certificate of ``keys`` in a thread of its own,
    stopped on the way out; the test fails if it ends before (a task of its raised)."""
    ready = threading.Event()
    box: dict[str, object] = {}

    async def main() -> None:
        # No plugins: whatever a fuzzer submits is refused, never run.
        options = PeerOptions(
            name="tp/0", credentials=tls.Credentials.load(keys, "tp", "peer"), plugins={}
        )
        peer = Peer(cfg, options)
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
    yield LivePeer(peer, address, keys, thread)
    assert thread.is_alive(), "the peer ended during the test"
    trio.from_thread.run_sync(peer.stop, trio_token=box["token"])  # type: ignore[arg-type]
    thread.join(30)


def make_keys(keys: Path) -> Path:
    """A CA, the peer's certificate (tp) and a client's (client, every grant) in ``keys``."""
    tls.init_ca(keys)
    tls.issue(keys, "tp")
    tls.issue(keys, "client", client=True)
    return keys


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LivePeer]:
    with peer_in_thread(config.DEFAULT, make_keys(tmp_path_factory.mktemp("keys"))) as peer:
        yield peer


def tls_client(live: LivePeer) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(live.keys / "ca.pem"))
    ctx.check_hostname = False
    ctx.load_cert_chain(str(live.keys / "client.pem"), str(live.keys / "client.key"))
    raw = socket.create_connection((live.address.host, live.address.port), timeout=10)
    sock = ctx.wrap_socket(raw)
    hello = m.Hello(m.PROTOCOL_VERSION, "client~fuzz", "", "client")
    sock.sendall(codec.frame(codec.encode_message(hello)))
    return sock


def closed_by_peer(sock: ssl.SSLSocket) -> bool:
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


def send_frame(live: LivePeer, data: bytes) -> bool:
    """Send raw bytes on a fresh authenticated connection; True when the peer closed it."""
    with tls_client(live) as sock:
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            return True
        return closed_by_peer(sock)


def read_frames(sock: ssl.SSLSocket, count: int, timeout: float = 10) -> list[m.Message]:
    """The next ``count`` messages on a connection (the peer's Hello first); fewer if the
    connection closes or stays quiet for ``timeout``."""
    sock.settimeout(timeout)
    buffer = b""
    out: list[m.Message] = []
    while len(out) < count:
        try:
            chunk = sock.recv(65536)
        except OSError:  # a timeout, a reset, a TLS error: the line is over for us
            break
        if not chunk:
            break
        buffer += chunk
        while len(buffer) >= 4 and len(buffer) >= 4 + codec.FRAME_HEADER.unpack(buffer[:4])[0]:
            n = codec.FRAME_HEADER.unpack(buffer[:4])[0]
            out.append(codec.decode_message(buffer[4 : 4 + n]))
            buffer = buffer[4 + n :]
    return out


def still_serves(live: LivePeer) -> bool:
    """The peer answers a status request on a new connection."""
    with tls_client(live) as sock:
        sock.sendall(codec.frame(codec.encode_message(m.StatusRequest(7, False))))
        replies = read_frames(sock, 2)
    return len(replies) == 2 and isinstance(replies[1], m.StatusReply)
