"""Moving a cluster to a new CA without stopping it (net/trust.py, docs/deploy.md): every CA
has a name of its own, a keys directory may trust several, and a peer accepts a certificate
of any CA its ca.pem holds — and no longer one of a CA it untrusted."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import trio
from cryptography import x509

from satind.net import messages as m
from satind.net import tls, trust
from satind.net.transport import Address, Identity, TcpTransport
from tests.security.test_tls import CFG, Inbox


def machine(ca: Path, name: str, into: Path) -> Path:
    """A machine's keys directory: the CA certificate, its own certificate and key."""
    tls.issue(ca, name)
    into.mkdir()
    for file in ("ca.pem", f"{name}.pem", f"{name}.key"):
        shutil.copy2(ca / file, into / file)
    return into


async def talks(server_keys: Path, server: str, client_keys: Path, client: str) -> bool:
    """Whether ``client`` gets a message through to ``server`` over mutual TLS."""
    inbox = Inbox()
    with trio.move_on_after(5):
        async with trio.open_nursery() as nursery:
            listening = TcpTransport(
                Identity(f"{server}/0", "c0", "peer"),
                CFG,
                inbox,
                credentials=tls.Credentials.load(server_keys, server, "peer"),
            )
            address = await nursery.start(listening.run, Address("127.0.0.1", 0))
            dialling = TcpTransport(
                Identity(f"{client}/0", "c0", "peer"),
                CFG,
                Inbox(),
                credentials=tls.Credentials.load(client_keys, client, "peer"),
                resolve=lambda name: address,
            )
            await nursery.start(dialling.run, None)
            dialling.post(f"{server}/0", m.StealRequest(1, True))
            with trio.move_on_after(2):
                await inbox.event.wait()
            nursery.cancel_scope.cancel()
    return bool(inbox.got)


async def test_a_cluster_moves_to_a_new_ca_one_machine_at_a_time(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    tls.init_ca(old)
    tls.init_ca(new)
    assert trust.trusted(old) != trust.trusted(new)  # each CA its own name
    a = machine(old, "a", tmp_path / "a")
    b = machine(old, "b", tmp_path / "b")
    # 1. Every machine trusts both CAs (a restart each reads it).
    for directory in (a, b):
        assert len(trust.change(directory, new / "ca.pem")) == 2
    assert await talks(a, "a", b, "b")
    # 2. Machine b gets a certificate of the new CA: old and new certificates talk.
    for file in ("b.pem", "b.key"):
        (b / file).unlink()
    tls.issue(new, "b")
    for file in ("b.pem", "b.key"):
        shutil.copy2(new / file, b / file)
    assert await talks(a, "a", b, "b") and await talks(b, "b", a, "a")
    # 3. Once every machine has a new certificate, the old CA is untrusted: a certificate of
    # it (a machine not yet moved, a leaked key) no longer gets in.
    assert trust.change(b, old / "ca.pem", remove=True) == trust.trusted(new)
    assert not await talks(b, "b", a, "a")


def test_a_directory_never_loses_its_own_ca_nor_every_ca(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    tls.init_ca(old)
    tls.init_ca(new)
    own = tmp_path / "own-ca.pem"
    own.write_bytes((old / "ca.pem").read_bytes())
    trust.change(old, new / "ca.pem")
    # The issuing directory still signs with its own CA, whatever else it trusts.
    cert, _ = tls.issue(old, "c")
    issued = x509.load_pem_x509_certificate(cert.read_bytes())
    assert issued.issuer.rfc4514_string() == trust.trusted(old)[0]
    with pytest.raises(tls.KeysError, match="cannot be untrusted here"):
        trust.change(old, own, remove=True)
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy2(new / "ca.pem", lone / "ca.pem")
    with pytest.raises(tls.KeysError, match="would trust no CA"):
        trust.change(lone, new / "ca.pem", remove=True)
    with pytest.raises(tls.KeysError, match="not a CA certificate"):
        trust.change(lone, cert)
