"""The address a machine's peers give the other members: ``--advertise HOST[:PORT]`` (``[daemon]
advertise``), else, when they listen on every interface (``--listen 0.0.0.0:7420``, what every
container and pod does), an address of this machine found the way the others will reach it.

Why a peer does not simply give the address it is bound to: 0.0.0.0 sends every other
machine back to itself (its dial of ``0.0.0.0:7420`` reaches its own peer 0, which answers
under another name). memberlist separates ``BindAddr`` from ``AdvertiseAddr`` for the same
reason, and picks the advertised address as this module does when none is given.

Candidates, in order; the first that is an address of this machine wins (a UDP socket can be
bound to it: an address from /etc/hosts that belongs to another namespace or host fails):

1. the source address of the route to each seed (a connected UDP socket's own address: the
   kernel picks the interface; no packet is sent) — the interface that reaches the system;
2. the source address of the default route (the same, towards a documentation address);
3. the first IPv4 address of an interface that is up, loopback excluded;
4. what the host name resolves to.

Where none fits (a machine with loopback only), the daemon refuses to start and says to give
``--advertise``.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import socket
import struct
from collections.abc import Callable, Iterable, Sequence

from satind.net.transport import Address

# A documentation address (RFC 5737): a route lookup towards it finds the default route's
# source, and nothing is ever sent there.
_NOWHERE = ("192.0.2.1", 9)
# ioctl: an interface's IPv4 address (linux/sockios.h).
_SIOCGIFADDR = 0x8915


class NoAddress(Exception):
    """No address of this machine can be advertised; the message says what to pass."""


def unspecified(host: str) -> bool:
    """Whether ``host`` is the unspecified address (0.0.0.0, ::): every interface, no one
    address another machine could dial."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def parse_advertise(text: str) -> Address:
    """``HOST`` or ``HOST:PORT`` (IPv6 in brackets) as an Address; port 0 when not given (the
    peer's own port: peer i advertises the port it listens on).

    Raises:
        ValueError: not of that form, or an unspecified host.
    """
    text = text.strip()
    host, port = text, 0
    if text.startswith("["):
        inside, _, rest = text[1:].partition("]")
        host = inside
        if rest:
            if not rest.startswith(":") or not rest[1:].isdigit():
                raise ValueError(f"bad advertised address {text!r}: use HOST or HOST:PORT")
            port = int(rest[1:])
    elif text.count(":") == 1:
        host, _, digits = text.partition(":")
        if not digits.isdigit():
            raise ValueError(f"bad advertised address {text!r}: use HOST or HOST:PORT")
        port = int(digits)
    if not host or unspecified(host) or not 0 <= port < 65536:
        raise ValueError(
            f"bad advertised address {text!r}: give an address or name of this machine that "
            "the other machines reach (not 0.0.0.0 or ::), optionally with :PORT"
        )
    return Address(host, port)


def for_peer(advertised: Address, index: int) -> Address:
    """Peer ``index``'s advertised address: the host, and the port plus ``index`` when a port
    was given (peer i listens on port + i), else 0 (its own bound port)."""
    return Address(advertised.host, advertised.port + index if advertised.port else 0)


def local(ip: str) -> bool:
    """Whether ``ip`` is an address of this machine (it can be bound to)."""
    try:
        family = socket.AF_INET6 if ":" in ip else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.bind((ip, 0))
    except OSError:
        return False
    return True


def route_source(ip: str, port: int) -> str | None:
    """The address this machine would send from to ``ip`` (None: no route)."""
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect((ip, port))  # a UDP connect picks a route and sends nothing
            source = str(sock.getsockname()[0])
    except OSError:
        return None
    return source


def interface_addresses() -> list[str]:
    """The IPv4 address of each interface that has one, loopback excluded, in index order."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            with contextlib.suppress(OSError):
                packed = struct.pack("256s", name.encode()[:15])
                ip = socket.inet_ntoa(fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, packed)[20:24])
                if not ipaddress.ip_address(ip).is_loopback:
                    found.append(ip)
    return found


def _resolved(seeds: Iterable[Address]) -> list[tuple[str, int]]:
    out = []
    for seed in seeds:
        with contextlib.suppress(OSError):
            for info in socket.getaddrinfo(seed.host, seed.port, type=socket.SOCK_DGRAM):
                out.append((str(info[4][0]), seed.port))
    return out


def _hostname() -> list[str]:
    with contextlib.suppress(OSError):
        return [socket.gethostbyname(socket.gethostname())]
    return []


def choose(
    seeds: Sequence[Address],
    *,
    resolve: Callable[[Sequence[Address]], list[tuple[str, int]]] = _resolved,
) -> tuple[str, str]:
    """An address of this machine to advertise, and where it came from (for the log).

    Raises:
        NoAddress: none found (only loopback here).
    """
    candidates: list[tuple[str | None, str]] = []
    for seed_ip, port in resolve(seeds):
        candidates.append(
            (route_source(seed_ip, port), f"the interface that reaches seed {seed_ip}")
        )
    candidates.append((route_source(*_NOWHERE), "the default route's interface"))
    candidates += [(ip, "an interface's address") for ip in interface_addresses()]
    candidates += [(ip, "the host name's address") for ip in _hostname()]
    for ip, why in candidates:
        if ip is None:
            continue
        parsed = ipaddress.ip_address(ip.split("%")[0])
        if parsed.is_loopback or parsed.is_unspecified or not local(ip):
            continue
        return ip, why
    raise NoAddress(
        "the peers listen on every interface, and this machine has no address the others "
        "could reach (only loopback found): give --advertise HOST (or [daemon] advertise), "
        "an address or name of this machine that the other machines reach"
    )
