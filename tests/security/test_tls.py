"""Mutual TLS: who gets past the handshake, and key handling."""

from __future__ import annotations

import datetime
import gc
import os
import ssl
from pathlib import Path

import pytest
import trio

from satind.config import NetConfig
from satind.net import codec, tls
from satind.net import messages as m
from satind.net.connection import SEND_CHUNK
from satind.net.transport import Address, Connection, Identity, TcpTransport

CFG = NetConfig(connect_timeout_s=5.0)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("keys")
    tls.init_ca(directory)
    for name in ("alpha", "beta"):
        tls.issue(directory, name)
    tls.issue(directory, "alice", client=True)
    expired_start = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=30)
    tls.issue(directory, "old", days=1, not_before=expired_start)
    return directory


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("other")
    tls.init_ca(directory)
    tls.issue(directory, "alpha")  # same name, wrong CA
    return directory


def test_key_files_are_private_and_world_readable_keys_are_refused(keys: Path) -> None:
    for key in (keys / "ca.key", keys / "alpha.key", keys / "alice.key"):
        assert key.stat().st_mode & 0o777 == 0o600
    tls.Credentials.load(keys, "alpha", "peer")
    os.chmod(keys / "beta.key", 0o644)
    try:
        with pytest.raises(tls.KeysError, match="chmod 600"):
            tls.Credentials.load(keys, "beta", "peer")
    finally:
        os.chmod(keys / "beta.key", 0o600)


def test_missing_files_say_how_to_make_them(tmp_path: Path, keys: Path) -> None:
    with pytest.raises(tls.KeysError, match="satind keys init"):
        tls.Credentials.load(tmp_path, "x", "peer")
    with pytest.raises(tls.KeysError, match=r"satind keys issue .* gamma --client"):
        tls.Credentials.load(keys, "gamma", "client")
    with pytest.raises(tls.KeysError, match="already holds a CA"):
        tls.init_ca(keys)
    with pytest.raises(tls.KeysError, match="bad certificate name"):
        tls.issue(keys, "a/b")


def test_a_certificate_out_of_its_dates_or_of_another_ca_is_refused_saying_which(
    keys: Path, other_ca: Path, tmp_path: Path
) -> None:
    """The other side refuses such a certificate during the handshake, and its user saw only
    "connection reset by peer": the loader says what is wrong first."""
    with pytest.raises(tls.KeysError, match=r"old.pem expired on .* issue it again"):
        tls.Credentials.load(keys, "old", "peer")
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=2)
    tls.issue(keys, "later", client=True, not_before=later)
    with pytest.raises(tls.KeysError, match=r"not valid before .* set the clock right"):
        tls.Credentials.load(keys, "later", "client")
    # alpha of another CA, next to this CA's ca.pem (a keys directory put together wrongly).
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "ca.pem").write_bytes((keys / "ca.pem").read_bytes())
    for suffix in (".pem", ".key"):
        (mixed / f"alpha{suffix}").write_bytes((other_ca / f"alpha{suffix}").read_bytes())
        os.chmod(mixed / f"alpha{suffix}", 0o600)
    with pytest.raises(tls.KeysError, match=r"was not issued by the CA of .*mixed"):
        tls.Credentials.load(mixed, "alpha", "peer")
    # A certificate still valid, of a CA that expired.
    lapsed = tmp_path / "lapsed"
    tls.init_ca(lapsed, days=0)
    tls.issue(lapsed, "n1")
    with pytest.raises(tls.KeysError, match=r"the CA certificate .* expired on .* make a new CA"):
        tls.Credentials.load(lapsed, "n1", "peer")


def test_identity_rules() -> None:
    assert tls.name_allowed("alpha/3", "peer", "alpha", "peer")
    assert tls.name_allowed("alpha", "peer", "alpha", "peer")
    assert not tls.name_allowed("alphabet/0", "peer", "alpha", "peer")
    assert not tls.name_allowed("alice~1", "peer", "alice", "client")  # a client posing as a peer
    assert tls.name_allowed("alice~1f2e", "client", "alice", "client")


class Inbox:
    def __init__(self) -> None:
        self.got: list[tuple[str, m.Message]] = []
        self.event = trio.Event()

    def __call__(self, conn: Connection, msg: m.Message) -> None:
        self.got.append((conn.remote_name, msg))
        self.event.set()


async def _server(nursery: trio.Nursery, keys: Path) -> tuple[TcpTransport, Inbox, Address]:
    inbox = Inbox()
    server = TcpTransport(
        Identity("alpha/0", "c0", "peer"),
        CFG,
        inbox,
        credentials=tls.Credentials.load(keys, "alpha", "peer"),
    )
    address = await nursery.start(server.run, Address("127.0.0.1", 0))
    return server, inbox, address


async def _beta(nursery: trio.Nursery, keys: Path, address: Address) -> TcpTransport:
    """beta/1, a peer of the cluster, dialling the server at ``address``."""
    client = TcpTransport(
        Identity("beta/1", "c1", "peer"),
        CFG,
        Inbox(),
        credentials=tls.Credentials.load(keys, "beta", "peer"),
        resolve=lambda name: address,
    )
    await nursery.start(client.run, None)
    return client


async def test_peers_with_cluster_certificates_talk(keys: Path) -> None:
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            _, inbox, address = await _server(nursery, keys)
            client = await _beta(nursery, keys, address)
            client.post("alpha/0", m.StealRequest(1, True))
            await inbox.event.wait()
            assert inbox.got == [("beta/1", m.StealRequest(1, True))]
            nursery.cancel_scope.cancel()


async def test_a_frame_of_megabytes_is_written_in_slices_and_arrives_whole(
    keys: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frame past SEND_CHUNK is written a slice at a time: a TLS stream encrypts all it is
    given before it sends any (a 40 MiB result cost its sender another 40 MiB at once)."""
    sizes: list[int] = []
    real = trio.SSLStream.send_all

    async def counted(self: trio.SSLStream[trio.SocketStream], data: bytes) -> None:
        sizes.append(len(data))
        await real(self, data)

    monkeypatch.setattr(trio.SSLStream, "send_all", counted)
    value = bytes(range(256)) * (5 * 4096 + 7)  # 5 MiB and a bit
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            _, inbox, address = await _server(nursery, keys)
            client = await _beta(nursery, keys, address)
            client.post("alpha/0", m.RunResult("r-1", value, None, 1.0, 2))
            await inbox.event.wait()
            (_, got), *_ = inbox.got
            assert isinstance(got, m.RunResult) and got.value == value
            nursery.cancel_scope.cancel()
    assert max(sizes) <= SEND_CHUNK
    assert sum(s for s in sizes if s == SEND_CHUNK) >= len(value) - SEND_CHUNK


async def test_a_dial_answered_under_another_name_is_closed_at_once(keys: Path) -> None:
    # beta/1 dials alpha/0#1 (a restarted slot's old instance) and alpha/0#2 answers: beta
    # refuses the name. alpha/0#2 finished its side of the handshake and took the connection
    # for its live one to beta/1. Left open, all it sent beta over it went unread until
    # beta's cyclic collector freed the TLS stream (a run once stalled 17 s on its answers).
    addresses: dict[str, Address] = {}
    inbox_alpha, inbox_beta = Inbox(), Inbox()

    def peer(name: str, certificate: str, inbox: Inbox) -> TcpTransport:
        credentials = tls.Credentials.load(keys, certificate, "peer")
        identity = Identity(name, certificate, "peer")
        return TcpTransport(identity, CFG, inbox, credentials=credentials, resolve=addresses.get)

    alpha = peer("alpha/0#2", "alpha", inbox_alpha)
    beta = peer("beta/1", "beta", inbox_beta)
    with trio.fail_after(15):
        async with trio.open_nursery() as nursery:
            addresses["alpha/0#1"] = await nursery.start(alpha.run, Address("127.0.0.1", 0))
            addresses["beta/1"] = await nursery.start(beta.run, Address("127.0.0.1", 0))
            gc.disable()  # the collector would close the socket by chance
            try:
                beta.post("alpha/0#1", m.Bye("for the old instance"))
                for _ in range(200):  # beta's dial fails (2 s at most)
                    if beta.connection("alpha/0#1") is None:
                        break
                    await trio.sleep(0.01)
                await trio.sleep(0.3)  # alpha has registered the connection by now
                for _ in range(25):  # what alpha sends beta arrives (5 s at most)
                    alpha.post("beta/1", m.StealReply(1, None))
                    with trio.move_on_after(0.2):
                        await inbox_beta.event.wait()
                    if inbox_beta.got:
                        break
            finally:
                gc.enable()
            assert inbox_beta.got[:1] == [("alpha/0#2", m.StealReply(1, None))]
            assert inbox_alpha.got == []
            nursery.cancel_scope.cancel()


async def _attempt(address: Address, transport: TcpTransport, nursery: trio.Nursery) -> str:
    await nursery.start(transport.run, None)
    try:
        conn = await transport.dial(address)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    conn.post(m.StealRequest(99, False))
    await trio.sleep(0.5)
    return "connected"


@pytest.mark.parametrize(
    ("who", "creds", "role"),
    [
        ("alpha/9", "other-ca", "peer"),  # right name, certificate from another CA
        ("old/0", "expired", "peer"),  # our CA, expired certificate
        ("alice~x", "alice-as-peer", "peer"),  # a client certificate posing as a peer
        ("beta/0", "alpha-as-beta", "peer"),  # another node's certificate
    ],
)
async def test_bad_certificates_are_rejected_before_any_message(
    keys: Path, other_ca: Path, who: str, creds: str, role: str
) -> None:
    credentials = {
        "other-ca": tls.Credentials.load(other_ca, "alpha", "peer"),
        # By hand too: Credentials.load refuses an expired certificate.
        "expired": tls.Credentials(
            (keys / "ca.pem").read_bytes(),
            (keys / "old.pem").read_bytes(),
            (keys / "old.key").read_bytes(),
            "old",
            "peer",
        ),
        # Built by hand: Credentials.load refuses a certificate in the wrong role, but an
        # intruder need not use satind's loader.
        "alice-as-peer": tls.Credentials(
            (keys / "ca.pem").read_bytes(),
            (keys / "alice.pem").read_bytes(),
            (keys / "alice.key").read_bytes(),
            "alice",
            "peer",
        ),
        "alpha-as-beta": tls.Credentials.load(keys, "alpha", "peer"),
    }[creds]
    with trio.fail_after(15):
        async with trio.open_nursery() as nursery:
            server, inbox, address = await _server(nursery, keys)
            intruder = TcpTransport(
                Identity(who, "c9", role), CFG, Inbox(), credentials=credentials
            )
            outcome = await _attempt(address, intruder, nursery)
            await trio.sleep(0.2)
            assert inbox.got == [], outcome
            assert server.counters.bad_frames >= 1 or outcome != "connected"
            nursery.cancel_scope.cancel()


async def test_plain_tcp_and_no_certificate_are_rejected(keys: Path) -> None:
    hello = codec.frame(codec.encode_message(m.Hello(m.PROTOCOL_VERSION, "x", "c9", "peer")))
    with trio.fail_after(15):
        async with trio.open_nursery() as nursery:
            server, inbox, address = await _server(nursery, keys)
            # Plain TCP speaking the protocol: the TLS server sees garbage and hangs up.
            stream = await trio.open_tcp_stream(address.host, address.port)
            await stream.send_all(
                hello + codec.frame(codec.encode_message(m.StealRequest(1, False)))
            )
            with trio.move_on_after(5):
                while await stream.receive_some(4096):
                    pass
            await stream.aclose()
            # TLS without a client certificate.
            ctx = ssl.create_default_context(cafile=str(keys / "ca.pem"))
            ctx.check_hostname = False
            tcp = await trio.open_tcp_stream(address.host, address.port)
            tls_stream = trio.SSLStream(tcp, ctx, server_hostname=None)
            with trio.move_on_after(5):
                try:
                    await tls_stream.do_handshake()
                    await tls_stream.send_all(hello)
                    while await tls_stream.receive_some(4096):
                        pass
                except trio.BrokenResourceError:
                    pass
            await trio.aclose_forcefully(tls_stream)
            assert inbox.got == []
            assert server.counters.bad_frames >= 2
            nursery.cancel_scope.cancel()
