"""Which CAs a keys directory trusts: ``ca.pem`` may hold several CA certificates, and a peer
or a client accepts a certificate of any of them (``Credentials`` hands them all to OpenSSL).
That is how a cluster moves to a new CA without stopping (docs/deploy.md, "Rotating the CA"):
every machine trusts both, then gets certificates of the new one, then trusts only the new.

``satind keys trust DIR NEW/ca.pem`` adds a CA, ``satind keys untrust DIR OLD/ca.pem``
removes one. A directory that holds ``ca.key`` (the issuing one) keeps its own CA, and no
directory is left trusting nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from satind.net.tls import CA_CERT, CA_KEY, KeysError, certificate_of


def _cas(path: Path) -> list[x509.Certificate]:
    try:
        certs = x509.load_pem_x509_certificates(path.read_bytes())
    except OSError as exc:
        raise KeysError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError:
        raise KeysError(f"{path} holds no PEM certificate") from None
    for cert in certs:
        try:
            is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        except x509.ExtensionNotFound:
            is_ca = False
        if not is_ca:
            raise KeysError(
                f"{path} holds {cert.subject.rfc4514_string()}, which is not a CA "
                "certificate: give the other CA's ca.pem"
            )
    return certs


def _fingerprint(cert: x509.Certificate) -> bytes:
    return cert.fingerprint(hashes.SHA256())


def _name(cert: x509.Certificate) -> str:
    return cert.subject.rfc4514_string()


def trusted(directory: Path) -> list[str]:
    """The names of the CAs ``directory`` trusts."""
    return [_name(c) for c in _cas(directory / CA_CERT)]


def change(directory: Path, other: Path, remove: bool = False) -> list[str]:
    """Trust the CAs of ``other`` (a ca.pem) in ``directory`` too, or (``remove``) no longer;
    the names trusted afterwards.

    Raises:
        KeysError: a file is missing or not CA certificates, or the change would remove the
            directory's own CA (the one of its ca.key) or every CA.
    """
    path = directory / CA_CERT
    current, changes = _cas(path), _cas(other)
    gone = {_fingerprint(c) for c in changes}
    if remove:
        kept = [c for c in current if _fingerprint(c) not in gone]
        if not kept:
            raise KeysError(f"{path} would trust no CA: trust the new one first")
        own = _own(directory)
        if own is not None and own not in {_fingerprint(c) for c in kept}:
            raise KeysError(
                f"{directory} issues with {CA_KEY}, whose CA cannot be untrusted here: "
                "untrust it in the machines' and clients' directories"
            )
    else:
        have = {_fingerprint(c) for c in current}
        kept = current + [c for c in changes if _fingerprint(c) not in have]
    data = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in kept)
    tmp = path.with_name(f".{CA_CERT}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return [_name(c) for c in kept]


def _own(directory: Path) -> bytes | None:
    """The fingerprint of the CA whose key ``directory`` holds (None: it holds no ca.key)."""
    key_path = directory / CA_KEY
    if not key_path.exists():
        return None
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    cert = certificate_of(key, _cas(directory / CA_CERT))
    return None if cert is None else _fingerprint(cert)
