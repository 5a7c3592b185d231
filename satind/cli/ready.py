"""`satind ready`: whether this machine's peers are up and in the system, as an exit code — for
a readiness probe (Kubernetes), a batch script that waits for its cluster, a deploy script.

It asks one peer (``--to``: this machine's first) for a shallow status: the peer's own line
and its view of the members, one request and no fan-out, so a probe every few seconds on
every machine costs the system nothing. ``readiness`` decides from that reply alone.
"""

from __future__ import annotations

import argparse
import sys

import trio

from satind.cli.common import connected
from satind.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError
from satind.client import client as remote
from satind.config import Config
from satind.net import messages as m
from satind.net.names import slot_of

# A member in one of these states is up: it takes part (standby and reclaimed peers are
# members that wait to be admitted or released; they answer and keep what they hold).
UP = ("alive", "standby", "reclaimed")
# A peer of the machine in one of these is being recovered (a crash the daemon restarts):
# not ready. "left" is not among them: a peer drained on purpose stays down.
DOWN = ("suspect", "dead")


def readiness(reply: m.StatusReply, peers: int | None, members: int) -> tuple[bool, str]:
    """Whether the machine of the peer that sent ``reply`` is ready, and a line that says why.

    Ready: that peer joined the system and is up; no peer of its machine is suspect or dead
    in its view; at least ``peers`` of them are up (None: however many there are); and at
    least ``members`` members of the system are up, itself included.
    """
    own = reply.peers[0]
    slot = slot_of(own.name)
    node = slot.split("/")[0]
    if not own.joined:
        return False, f"{slot} has not joined the system: its seeds have not answered (see its log)"
    if own.state not in UP:
        return False, f"{slot} is {own.state}"
    local = [p for p in reply.peers if slot_of(p.name).split("/")[0] == node]
    down = [p for p in local if p.state in DOWN]
    if down:
        said = ", ".join(f"{slot_of(p.name)} {p.state}" for p in down)
        return False, f"a peer of {node} is being recovered: {said}"
    up = [p for p in local if p.state in UP]
    if peers is not None and len(up) < peers:
        return False, f"{len(up)} of {peers} peers of {node} are up"
    everyone = sum(1 for p in reply.peers if p.state in UP)
    if everyone < members:
        return False, f"{everyone} of {members} members are up"
    return True, (
        f"{slot} joined; {len(up)} peer{'s' * (len(up) != 1)} of {node} up; "
        f"{everyone} member{'s' * (everyone != 1)} up"
    )


async def ready(args: argparse.Namespace, cfg: Config) -> int:
    if args.peers is not None and args.peers < 1:
        raise CliError("--peers must be at least 1", EXIT_USAGE)
    if args.members < 1:
        raise CliError("--members must be at least 1", EXIT_USAGE)
    timeout = cfg.client.timeout_s if args.timeout is None else args.timeout
    if not timeout > 0:
        raise CliError("--timeout must be a positive number of seconds", EXIT_USAGE)
    reply: m.StatusReply | None = None
    why = f"no answer within {timeout:g} s"
    with trio.move_on_after(timeout):
        try:
            async with connected(args, cfg) as client:
                reply = await client.status(within_s=timeout, deep=False)
        except remote.PeerUnavailable as exc:
            why = str(exc)
    if reply is None or not reply.peers:
        print(f"not ready: {why}", file=sys.stderr)
        return EXIT_FAILED
    ok, line = readiness(reply, args.peers, args.members)
    if not ok:
        print(f"not ready: {line}", file=sys.stderr)
        return EXIT_FAILED
    print(f"ready: {line}")
    return EXIT_OK
