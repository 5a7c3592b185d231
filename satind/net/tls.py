"""The cluster CA, node and client certificates, and the TLS contexts peers and clients use.

Every connection is TLS 1.3 with a certificate on both sides, checked against the cluster CA
(DESIGN "Wire and security"). A certificate's common name is the party's identity: a node
certificate named ``NAME`` lets a machine run peers ``NAME/0``, ``NAME/1``...; a client
certificate named ``NAME`` lets clients call themselves ``NAME~<anything>``. The organizational
unit says which kind it is ("peer" or "client"), so a client certificate cannot pose as a peer.
Host names are not checked — peers are identified by certificate names, not by DNS.

Key files are written 0600, and a key file that others can read is refused: a cluster's security
is its keys.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import CertificatePublicKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from satind.net.names import CLIENT_SEPARATOR as CLIENT_SEPARATOR
from satind.net.names import client_base_name as client_base_name

CA_CERT = "ca.pem"
CA_KEY = "ca.key"
ROLE_PEER = "peer"
ROLE_CLIENT = "client"

# What a client certificate allows (docs/operations.md, "What a client may do"): each grant is
# one more organizational unit of its subject, "may:<grant>", set when it is issued, read by
# every peer from the verified certificate. "submit": submit runs, and cancel, suspend and
# read one's own; "operate": drain, reclaim, release, stop, reload plugins, and cancel or
# read any run; "ship": submit runs with code sent along (client API, `--ship`).
GRANT_SUBMIT = "submit"
GRANT_OPERATE = "operate"
GRANT_SHIP = "ship"
GRANTS = (GRANT_SUBMIT, GRANT_OPERATE, GRANT_SHIP)
GRANT_PREFIX = "may:"
# A client certificate issued before grants existed allows what every client could do then.
LEGACY_GRANTS = frozenset({GRANT_SUBMIT, GRANT_OPERATE})
# Separators between a certificate's name and the instance suffix of a party's name.
PEER_SEPARATOR = "/"


class KeysError(Exception):
    """A key directory problem, with what to do about it."""


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def check_key_file(path: Path) -> None:
    """Refuse a key file that anyone but its owner can read or write.

    Raises:
        KeysError: the file is missing or its mode lets others in.
    """
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise KeysError(f"cannot read key {path}: {exc.strerror}") from None
    if mode & 0o077:
        raise KeysError(
            f"key {path} is readable by others (mode {mode & 0o777:o}); run: chmod 600 {path}"
        )


def _new_ca(name: str, days: int) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _new_certificate(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    name: str,
    client: bool,
    days: int,
    not_before: datetime.datetime | None = None,
    grants: Sequence[str] = (),
) -> tuple[bytes, bytes]:
    """A node or client certificate signed by the CA: (certificate PEM, key PEM); a client's
    with its ``grants``."""
    key = ec.generate_private_key(ec.SECP256R1())
    role = ROLE_CLIENT if client else ROLE_PEER
    start = not_before or (_now() - datetime.timedelta(minutes=5))
    usages = (
        [ExtendedKeyUsageOID.CLIENT_AUTH]
        if client
        else [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.COMMON_NAME, name),
                    x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, role),
                    *(
                        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, GRANT_PREFIX + g)
                        for g in (grants if client else ())
                    ),
                ]
            )
        )
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(name), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def certificate_of(
    key: ec.EllipticCurvePrivateKey, certs: Sequence[x509.Certificate]
) -> x509.Certificate | None:
    """The certificate among ``certs`` of the private ``key`` (None: none of them)."""

    def der(public: CertificatePublicKeyTypes) -> bytes:
        return public.public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    mine = der(key.public_key())
    return next((c for c in certs if der(c.public_key()) == mine), None)


def ca_name() -> str:
    """A new CA's name: its own, so that peers can trust two CAs at once while the cluster
    moves from one to the other (net/trust.py). OpenSSL checks a certificate against the
    trusted CA of its issuer's name; two CAs of one name, and it tries only the first."""
    return f"satind cluster CA {_now():%Y-%m-%d} {os.urandom(3).hex()}"


def init_ca(directory: Path, name: str = "", days: int = 3650) -> Path:
    """Create a cluster CA (EC P-256) in ``directory``, named ``name`` (default:
    ``ca_name()``); returns the certificate's path.

    Raises:
        KeysError: the directory already holds a CA.
    """
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    if (directory / CA_CERT).exists() or (directory / CA_KEY).exists():
        raise KeysError(f"{directory} already holds a CA ({CA_CERT}); use another directory")
    cert, key = _new_ca(name or ca_name(), days)
    _write_private(directory / CA_KEY, _key_pem(key))
    (directory / CA_CERT).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return directory / CA_CERT


def issue(
    directory: Path,
    name: str,
    *,
    client: bool = False,
    days: int = 825,
    not_before: datetime.datetime | None = None,
    grants: Sequence[str] = (GRANT_SUBMIT,),
) -> tuple[Path, Path]:
    """Issue a node (or client) certificate ``NAME.pem`` with key ``NAME.key``, signed by the
    CA; a client's allows ``grants`` (``GRANTS``).

    Raises:
        KeysError: no CA here, a bad name, an unknown grant, or the files exist already.
    """
    unknown = [g for g in grants if g not in GRANTS]
    if unknown:
        raise KeysError(f"unknown grant {unknown[0]!r}: a client may {', '.join(GRANTS)}")
    if (
        not name
        or any(c in name for c in f"{PEER_SEPARATOR}{CLIENT_SEPARATOR}\\ ")
        or name.startswith(".")
    ):
        raise KeysError(
            f"bad certificate name {name!r}: use letters, digits, '-', '_' or '.', "
            f"without {PEER_SEPARATOR!r}, {CLIENT_SEPARATOR!r} or spaces"
        )
    if name == "ca":
        raise KeysError("'ca' is the CA's own file name; pick another name")
    ca_cert_path, ca_key_path = directory / CA_CERT, directory / CA_KEY
    if not ca_key_path.exists():
        raise KeysError(f"no CA in {directory}: run `satind keys init {directory}` first")
    check_key_file(ca_key_path)
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    if cert_path.exists() or key_path.exists():
        raise KeysError(f"{cert_path} already exists")
    ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    # ca.pem may trust other CAs too (a rotation, net/trust.py): this one's is ca.key's.
    ca_cert = certificate_of(ca_key, x509.load_pem_x509_certificates(ca_cert_path.read_bytes()))
    if ca_cert is None:
        raise KeysError(f"{ca_cert_path} holds no certificate of {ca_key_path}")
    cert_pem, key_pem = _new_certificate(ca_cert, ca_key, name, client, days, not_before, grants)
    _write_private(key_path, key_pem)
    cert_path.write_bytes(cert_pem)
    return cert_path, key_path


def _check_role(path: Path, cert_pem: bytes, name: str, role: str, directory: Path) -> None:
    """A certificate used in the role it was issued for (the other side would refuse it, and
    the user would only see a connection that closed)."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        raise KeysError(f"{path} is not a PEM certificate") from None
    units = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)
    issued = str(units[0].value) if units else ""
    if issued == role:
        return
    if role == ROLE_CLIENT:
        raise KeysError(
            f"the certificate of {name!r} is a peer's (a node certificate), not a client's: "
            f"use the client certificate 'client' (--as client), or issue one with "
            f"`satind keys issue {directory} NAME --client`"
        )
    raise KeysError(
        f"the certificate of {name!r} is a {issued or 'unknown role'}'s, not a peer's: a "
        f"machine needs a node certificate (`satind keys issue {directory} {name}`)"
    )


def _check_validity(
    path: Path, cert_pem: bytes, ca_pem: bytes, name: str, role: str, directory: Path
) -> None:
    """A certificate in its validity period, of a valid CA of the directory: the other side
    refuses any other in the handshake, where its user sees only a connection reset."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    again = f"`satind keys issue {directory} {name}{' --client' if role == ROLE_CLIENT else ''}`"
    now = datetime.datetime.now(datetime.UTC)
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    if now < start:
        raise KeysError(
            f"the certificate {path} is not valid before {start:%Y-%m-%d %H:%M:%S} UTC, and "
            f"this machine's clock says {now:%Y-%m-%d %H:%M:%S} UTC: set the clock right, or "
            f"issue it again ({again})"
        )
    if now > end:
        raise KeysError(
            f"the certificate {path} expired on {end:%Y-%m-%d %H:%M:%S} UTC: issue it again "
            f"({again})"
        )
    try:  # several while a cluster moves to a new CA (both in ca.pem)
        cas = x509.load_pem_x509_certificates(ca_pem)
    except ValueError:
        raise KeysError(f"{directory / CA_CERT} is not a PEM certificate") from None
    issuers = [ca for ca in cas if _issued_by(cert, ca)]
    if not issuers:
        raise KeysError(
            f"the certificate {path} was not issued by the CA of {directory} ({CA_CERT} there): "
            "the peers refuse it. Use the keys directory it came with, or issue it again from "
            f"this CA ({again})"
        )
    if all(now > (ended := ca.not_valid_after_utc) for ca in issuers):
        raise KeysError(
            f"the CA certificate {directory / CA_CERT} expired on {ended:%Y-%m-%d %H:%M:%S} "
            "UTC: make a new CA and issue every certificate again (docs/deploy.md, rotating "
            "the CA)"
        )


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
        return True
    except Exception:  # ValueError (another issuer's name), InvalidSignature, TypeError
        return False


@dataclass(frozen=True)
class Credentials:
    """What one party needs for TLS: the CA certificate, and its own certificate and key.

    Held in memory (PEM): loaded from a keys directory (``load``), or made for the embedded
    default and handed to its peer processes over a pipe (``ephemeral``), so that no key of
    a throw-away CA ever touches a disk a crash could leave it on.
    """

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    name: str
    role: str

    @classmethod
    def load(cls, directory: Path, name: str, role: str) -> Credentials:
        """Read ``NAME.pem``/``NAME.key`` and the CA from ``directory``.

        Raises:
            KeysError: a file is missing or unreadable, or a key is readable by others.
        """
        ca, cert, key = directory / CA_CERT, directory / f"{name}.pem", directory / f"{name}.key"
        for path in (ca, cert):
            if not path.exists():
                flag = " --client" if role == ROLE_CLIENT else ""
                hint = (
                    f"satind keys issue {directory} {name}{flag}"
                    if path == cert
                    else f"satind keys init {directory}"
                )
                raise KeysError(f"missing {path}; create it with: {hint}")
        check_key_file(key)
        try:
            cert_pem = cert.read_bytes()
            loaded = cls(ca.read_bytes(), cert_pem, key.read_bytes(), name, role)
        except OSError as exc:
            raise KeysError(f"cannot read {exc.filename}: {exc.strerror}") from None
        _check_role(cert, cert_pem, name, role, directory)
        _check_validity(cert, cert_pem, loaded.ca_pem, name, role, directory)
        return loaded

    def as_json(self) -> dict[str, str]:
        """For handing to a child process over a pipe (``from_json``)."""
        return {
            "ca": self.ca_pem.decode(),
            "cert": self.cert_pem.decode(),
            "key": self.key_pem.decode(),
            "name": self.name,
            "role": self.role,
        }

    @classmethod
    def from_json(cls, data: dict[str, str]) -> Credentials:
        """Raises KeysError: not what ``as_json`` makes."""
        try:
            return cls(
                data["ca"].encode(),
                data["cert"].encode(),
                data["key"].encode(),
                data["name"],
                data["role"],
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise KeysError(f"bad credentials handed over: {exc}") from None

    def _context(self, purpose: ssl.Purpose) -> ssl.SSLContext:
        try:
            ctx = ssl.create_default_context(purpose, cadata=self.ca_pem.decode())
            ctx.minimum_version = ssl.TLSVersion.TLSv1_3
            ctx.check_hostname = False  # identities are certificate names, checked later
            ctx.verify_mode = ssl.CERT_REQUIRED
            _load_chain(ctx, self.cert_pem, self.key_pem)
        except (ssl.SSLError, ValueError, OSError) as exc:
            raise KeysError(f"unusable certificate or key for {self.name}: {exc}") from None
        return ctx

    def server_context(self) -> ssl.SSLContext:
        return self._context(ssl.Purpose.CLIENT_AUTH)

    def client_context(self) -> ssl.SSLContext:
        return self._context(ssl.Purpose.SERVER_AUTH)


def _load_chain(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """Load a certificate and key held in memory. OpenSSL (through ``ssl``) reads them only
    from a path, so give it one that is no file on any disk: an anonymous memory file
    (``memfd_create``), closed right after. Where there is none, a 0600 temporary file that
    is removed at once."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("satind-credentials", os.MFD_CLOEXEC)
        try:
            os.write(fd, cert_pem + key_pem)
            ctx.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        return
    import tempfile

    fd, path = tempfile.mkstemp(prefix="satind-")
    try:
        os.write(fd, cert_pem + key_pem)
        os.close(fd)
        ctx.load_cert_chain(path)
    finally:
        os.unlink(path)


@dataclass(frozen=True)
class EphemeralKeys:
    """A throw-away cluster CA in memory, with a node and a client certificate: the embedded
    default's mutual TLS (`satind run`). Nothing of it is written anywhere."""

    node: Credentials
    client: Credentials

    @classmethod
    def make(cls, node: str, client: str) -> EphemeralKeys:
        ca_cert, ca_key = _new_ca("satind ephemeral CA", days=2)
        ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
        node_cert, node_key = _new_certificate(ca_cert, ca_key, node, False, 2)
        # The embedded default's client is its user's own: it may do everything.
        client_cert, client_key = _new_certificate(ca_cert, ca_key, client, True, 2, None, GRANTS)
        return cls(
            Credentials(ca_pem, node_cert, node_key, node, ROLE_PEER),
            Credentials(ca_pem, client_cert, client_key, client, ROLE_CLIENT),
        )


def certificate_identity(
    peercert: dict[str, object] | None,
) -> tuple[str, str, frozenset[str]]:
    """(common name, role, grants) of a verified peer certificate
    (``SSLObject.getpeercert()``); a client certificate without grants has ``LEGACY_GRANTS``.

    Raises:
        ValueError: no certificate or no common name.
    """
    if not peercert:
        raise ValueError("no certificate")
    names: list[str] = []
    units: list[str] = []
    subject = peercert.get("subject", ())
    assert isinstance(subject, tuple)
    for rdn in subject:
        for key, value in rdn:
            if key == "commonName":
                names.append(value)
            elif key == "organizationalUnitName":
                units.append(value)
    if not names:
        raise ValueError("certificate has no common name")
    roles = [u for u in units if not u.startswith(GRANT_PREFIX)]
    grants = frozenset(u[len(GRANT_PREFIX) :] for u in units if u.startswith(GRANT_PREFIX))
    role = roles[0] if roles else ""
    if role == ROLE_CLIENT and not grants:
        grants = LEGACY_GRANTS
    return names[0], role, grants


def name_allowed(claimed: str, role: str, cert_name: str, cert_role: str) -> bool:
    """May a party whose certificate says (cert_name, cert_role) call itself ``claimed``?"""
    if role != cert_role:
        return False
    separator = PEER_SEPARATOR if role == ROLE_PEER else CLIENT_SEPARATOR
    return claimed == cert_name or claimed.startswith(cert_name + separator)
