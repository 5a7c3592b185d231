"""Commands about the system itself: `status`, `drain`, `stop`."""

from __future__ import annotations

import argparse
import json

from satind.cli.common import connected
from satind.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError
from satind.cli.report import status_json
from satind.config import Config
from satind.net import messages as m


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
            client.requests.new(), [args.peer] if args.peer else [], args.cluster or ""
        )
        reply = await client.control(msg)
    if not reply.ok:
        raise CliError(reply.message, EXIT_FAILED)
    print(f"{reply.message}: {', '.join(reply.affected)}")
    return EXIT_OK


async def stop(args: argparse.Namespace, cfg: Config) -> int:
    async with connected(args, cfg) as client:
        reply = await client.control(m.StopRequest(client.requests.new(), args.all, args.drain))
    print(f"{reply.message}: {', '.join(reply.affected)}")
    return EXIT_OK if reply.ok else EXIT_FAILED
