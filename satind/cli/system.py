"""Commands about the system itself: `status`, `drain`, `stop`, `plugins --to`/`reload`."""

from __future__ import annotations

import argparse
import dataclasses
import json

from satind.cli.common import connected
from satind.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError
from satind.config import Config
from satind.net import messages as m
from satind.net.names import slot_of
from satind.node.status import status_json


async def status(args: argparse.Namespace, cfg: Config) -> int:
    async with connected(args, cfg) as client:
        if args.watch:
            from satind.cli.console import watch_status

            await watch_status(client, cfg)
            return EXIT_OK
        reply = await client.status()
    if args.json:
        print(json.dumps(status_json(reply)))
        return EXIT_OK
    from satind.cli.console import print_status

    print_status(reply)
    return EXIT_OK


async def drain(args: argparse.Namespace, cfg: Config) -> int:
    if bool(args.peer) == bool(args.cluster):
        raise CliError("give either PEER_ID or --cluster NAME", EXIT_USAGE)
    async with connected(args, cfg) as client:
        msg = m.DrainRequest(
            client.requests.new(),
            [args.peer] if args.peer else [],
            args.cluster or "",
            _deadline(args),
        )
        reply = await client.control(msg)
    if not reply.ok:
        raise CliError(reply.message, EXIT_FAILED)
    print(f"{reply.message}: {', '.join(reply.affected)}")
    return EXIT_OK


async def reclaim(args: argparse.Namespace, cfg: Config) -> int:
    """`satind reclaim PEER...` and `satind release PEER...`."""
    async with connected(args, cfg) as client:
        msg = m.ReclaimRequest(client.requests.new(), list(args.peers), args.command == "reclaim")
        reply = await client.control(msg)
    if not reply.ok:
        raise CliError(reply.message, EXIT_FAILED)
    print(f"{reply.message}: {', '.join(reply.affected)}")
    return EXIT_OK


def _deadline(args: argparse.Namespace) -> float:
    """--deadline S as the wire has it (negative: the peers' [daemon] drain_deadline_s)."""
    if args.deadline is None:
        return -1.0
    if not args.deadline >= 0:  # (NaN too)
        raise CliError(f"--deadline must be 0 or more seconds, got {args.deadline}", EXIT_USAGE)
    return float(args.deadline)


async def stop(args: argparse.Namespace, cfg: Config) -> int:
    if args.deadline is not None and not args.drain:
        raise CliError("--deadline goes with --drain (a plain stop leaves at once)", EXIT_USAGE)
    deadline = _deadline(args)
    async with connected(args, cfg) as client:
        msg = m.StopRequest(client.requests.new(), args.all, args.drain, deadline)
        reply = await client.control(msg)
    print(f"{reply.message}: {', '.join(reply.affected)}")
    return EXIT_OK if reply.ok else EXIT_FAILED


async def plugins(args: argparse.Namespace, cfg: Config) -> int:
    """Each member's plugins, members with the same list together (a plugin whose code hash
    differs between members shows as two groups: such a run is refused)."""
    async with connected(args, cfg) as client:
        reply = await client.plugins(reload=args.action == "reload")
    if args.json:
        print(json.dumps([dataclasses.asdict(p) for p in reply.members]))
        return EXIT_OK
    failed = [p for p in reply.members if p.note.startswith("reload failed")]
    if args.action == "reload":
        for member in reply.members:
            print(f"{slot_of(member.member)}: {member.note}")
        return EXIT_FAILED if failed else EXIT_OK
    groups: dict[tuple[m.PluginInfo, ...], list[str]] = {}
    for member in reply.members:
        groups.setdefault(tuple(member.plugins), []).append(slot_of(member.member))
    for listed, members in groups.items():
        print(f"{', '.join(members)}:")
        for p in listed or ():
            print(f"  {p.name:12} {p.code_hash[:12]:12} {p.usage:36} {p.source}")
            if p.unmet:
                print(f"  {'':12} takes no part in its runs: it requires {p.unmet}")
        if not listed:
            print("  (no plugins)")
    return EXIT_OK
