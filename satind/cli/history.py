"""`satind runs`: the runs of the run history (node/history.py), which outlives restarts."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import time

from rich.console import Console
from rich.table import Table

from satind.cli.common import connected
from satind.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError
from satind.config import Config
from satind.net import messages as m

# `--since 90m`: seconds per unit.
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
STATES = ("queued", "running", "done", "failed", "suspended", "cancelled")


def since_seconds(text: str) -> float:
    """``30m`` -> 1800.0 (s, m, h, d, w; a bare number is seconds).

    Raises:
        CliError: not a duration.
    """
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if match is None:
        raise CliError(
            f"--since {text!r} is not a duration: give a number and a unit, such as 90s, "
            "30m, 1h, 2d or 1w",
            EXIT_USAGE,
        )
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


async def runs(args: argparse.Namespace, cfg: Config) -> int:
    states = [s.strip() for s in (args.state or "").split(",") if s.strip()]
    unknown = [s for s in states if s not in STATES]
    if unknown:
        raise CliError(
            f"--state {','.join(unknown)}: a run's state is one of {', '.join(STATES)}",
            EXIT_USAGE,
        )
    since = time.time() - since_seconds(args.since) if args.since else 0.0
    limit = 10_000 if args.all else args.limit
    async with connected(args, cfg) as client:
        reply = await client.history("", states, since, limit)
    if not reply.runs and reply.error:
        raise CliError(f"no run history: {reply.error}", EXIT_FAILED)
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in reply.runs]))
        return EXIT_OK
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    if reply.runs:
        console.print(history_table(reply.runs))
    else:
        console.print("no runs" + (" match" if states or since else ""))
    if reply.error:
        console.print(f"[yellow]note:[/] {reply.error}", highlight=False)
    return EXIT_OK


def history_table(records: list[m.RunRecord]) -> Table:
    table = Table(title="runs (newest first)", title_justify="left")
    widest = max((len(r.run_id) for r in records), default=3)
    table.add_column("run", min_width=widest, no_wrap=True)
    table.add_column("plugin", overflow="fold")
    table.add_column("state")
    table.add_column("ended")
    table.add_column("elapsed s", justify="right")
    table.add_column("masters", overflow="fold")
    table.add_column("owner")
    table.add_column("check / error", overflow="fold")
    for r in records:
        ended = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.ended_at))
        table.add_row(
            r.run_id,
            " ".join([r.plugin, *r.argv]),
            r.state,
            ended if r.ended_at else "-",
            f"{r.elapsed_s:.1f}" if r.ended_at else "-",
            " ".join(r.masters),
            r.owner or "-",
            r.error or r.check or "",
        )
    return table
