"""Seeds by name: a seed ``HOST:PORT`` whose host resolves to many addresses stands for all of
them, resolved anew at each join attempt.

Why not leave the name to ``trio.open_tcp_stream``, as a seed was dialled before: that
connects to the *first* address that answers and sends the join there. Behind a name that lists
every peer of the system — a Kubernetes headless Service, a DNS round-robin record, a Docker
Compose service with replicas — that first address may be this very peer (the name lists it
too), whose own join answer never counts as joining, so the join times out; and a joiner that
reaches one peer only, out of two that started at the same time and each see only themselves
so far, may found a system of its own. So the joiner resolves the name itself, drops its own
address, and sends its join to every other address the name gives (memberlist's Join does
the same with each address of a name). Each retry resolves again: pods that start after the
joiner, or whose addresses reach DNS late, are found by the next attempt.

IP literals are never looked up (the simulator's addresses are literals: it must not touch
DNS), and a name that does not resolve (yet) gives no address for this attempt, not an error:
the joiner tries again until ``membership.join_timeout_s``.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence

import trio

from satind.net.parties import Address

log = logging.getLogger("satind.membership.swim")

# host, port -> the IP addresses the host stands for (empty: none now).
Resolver = Callable[[str, int], Awaitable[list[str]]]


def is_literal(host: str) -> bool:
    """Whether ``host`` is an IP address (v4 or v6) rather than a name."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the system's resolver (``getaddrinfo``: /etc/hosts, DNS) gives ``host``,
    in its order, each once.

    Raises:
        OSError: the name does not resolve (``socket.gaierror``).
    """
    infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in infos:
        ip = str(sockaddr[0])
        if ip not in found:
            found.append(ip)
    return found


async def resolve_seeds(
    seeds: Sequence[Address], resolve: Resolver = system_resolver
) -> list[Address]:
    """Every address the seeds stand for now: a literal as it is, a name as each address it
    resolves to (with the seed's port); in the seeds' order, each address once. A name that
    does not resolve contributes nothing this time (logged at DEBUG)."""
    out: list[Address] = []
    for seed in seeds:
        if is_literal(seed.host):
            found = [seed]
        else:
            try:
                found = [Address(ip, seed.port) for ip in await resolve(seed.host, seed.port)]
            except OSError as exc:
                log.debug("seed %s does not resolve now: %s", seed, exc)
                found = []
        for address in found:
            if address not in out:
                out.append(address)
    return out
