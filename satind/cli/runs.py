"""Commands about runs on a running system: `submit`, `result`, `resume`, `suspend`,
`cancel`, `logs`. Made of the Python API (client/api.py): a command is a Cluster call and
the printing of what it gave."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Awaitable

import trio

from satind import plugin as plugins
from satind.cli.common import cluster_of, connected
from satind.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, CliError
from satind.cli.report import show_result
from satind.client import api
from satind.client import client as remote
from satind.client.errors import NotAllowed, Refused, RunLost, VersionMismatch
from satind.client.files import ClientFiles, save_into
from satind.config import Config
from satind.net import messages as m


async def submit(args: argparse.Namespace, cfg: Config) -> int:
    # Parsed, checked and reported on the run's master: this machine needs no plugin code.
    if args.trace is not None and not args.wait:
        raise CliError("--trace needs --wait (the trace is fetched when the run ends)", EXIT_USAGE)
    # The run's files are this machine's: input files go with the submission, outputs are
    # written here (client/files.py).
    run_files = ClientFiles(args.args, cfg.files.max_input_bytes)
    async with cluster_of(args, cfg) as cluster:
        try:
            run = await cluster.submit(
                args.plugin,
                *args.args,
                check=not args.no_check,
                files=run_files,
                ship=args.ship,
                weight=args.weight,
            )
        except (plugins.UsageError, plugins.UnknownPlugin) as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
        except NotAllowed:
            raise  # said as such by the command line (cli/__init__.py)
        except VersionMismatch as exc:  # the plugin directories' to fix, not a retry's
            raise CliError(f"run refused: {exc}", EXIT_USAGE) from None
        except Refused as exc:
            raise CliError(f"run refused: {exc}", EXIT_RUNTIME) from None
        except ValueError as exc:  # nothing to ship there (client/api.py ``shipment``)
            raise CliError(str(exc), EXIT_USAGE) from None
        if not args.wait:
            return _print_run_id(run.id, args.json)
        print(f"satind: run {run.id} submitted", file=sys.stderr)
        bar = (args.plugin, list(args.args)) if not args.json and sys.stderr.isatty() else None
        result = await _until_interrupted(wait_or_follow(run, cfg, bar))
        if result is None:
            return await _interrupted(run, args)
        if args.trace is not None:
            await remote.save_trace(cluster.client, run.id, args.trace)
    saved = run_files.save(result)
    return show_result(result, args.plugin, list(args.args), args.json, cfg, saved)


async def _until_interrupted(waiting: Awaitable[m.RunResult]) -> m.RunResult | None:
    """Await ``waiting``; None if Ctrl-C (SIGINT) came first."""
    got: list[m.RunResult] = []
    async with trio.open_nursery() as nursery:

        async def wait() -> None:
            got.append(await waiting)
            nursery.cancel_scope.cancel()

        nursery.start_soon(wait)
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                nursery.cancel_scope.cancel()
                break
    return got[0] if got else None


async def _interrupted(run: api.Run, args: argparse.Namespace) -> int:
    """Ctrl-C on `submit --wait`: the run goes on (as with Ray's `job submit`), and we say
    how to cancel it or fetch its result; with --cancel-on-interrupt, it is cancelled."""
    options = [f"--to {args.to}" if args.to else "", f"--keys {args.keys}" if args.keys else ""]
    where = " ".join(o for o in options if o)
    run_id = run.id
    if args.cancel_on_interrupt:
        try:
            await run.cancel()
        except NotAllowed:
            raise  # said as such by the command line (cli/__init__.py)
        except Refused as exc:
            raise CliError(f"interrupted; cancelling {run_id} failed: {exc}", 130) from None
        print(f"satind: interrupted; cancelled {run_id}", file=sys.stderr)
        return 130
    print(
        f"satind: interrupted; run {run_id} goes on.\n"
        f"  cancel it:        satind cancel {run_id} {where}\n"
        f"  fetch its result: satind result {run_id} --wait {where}",
        file=sys.stderr,
    )
    return 130


async def wait_or_follow(
    run: api.Run, cfg: Config, bar: tuple[str, list[str]] | None = None
) -> m.RunResult:
    """The run's result: from the peer it was submitted to (with a progress bar on stderr if
    ``bar`` names the plugin and its arguments, else its output lines), or, when that peer is
    lost (a crash; the run goes on under an elected master), through the other members."""
    try:
        if bar is not None:
            from satind.cli.console import follow_run

            try:
                return await follow_run(run.cluster.client, run.id, bar[0], bar[1], cfg)
            except remote.PeerUnavailable as exc:
                print(
                    f"satind: {exc}; following run {run.id} through the other peers",
                    file=sys.stderr,
                )
        return await run.result_message(remote.to_stderr)
    except RunLost as exc:
        raise CliError(str(exc), EXIT_RUNTIME) from None


async def resume(args: argparse.Namespace, cfg: Config) -> int:
    async with cluster_of(args, cfg) as cluster:
        try:
            run = await cluster.resume(args.run_id)
        except NotAllowed:
            raise  # said as such by the command line (cli/__init__.py)
        except VersionMismatch as exc:
            raise CliError(f"resume refused: {exc}", EXIT_USAGE) from None
        except Refused as exc:
            raise CliError(f"resume refused: {exc}", EXIT_RUNTIME) from None
        if not args.wait:
            return _print_run_id(run.id, args.json)
        result = await wait_or_follow(run, cfg)
        status = await _status_or_none(cluster.client)
    plugin_name, argv = _plugin_and_argv(status, run.id)
    return show_result(result, plugin_name, argv, args.json, cfg)


async def suspend(args: argparse.Namespace, cfg: Config) -> int:
    async with cluster_of(args, cfg) as cluster:
        try:
            print(await cluster.suspend(args.run_id))
        except NotAllowed:
            raise  # said as such by the command line (cli/__init__.py)
        except Refused as exc:
            raise CliError(str(exc), EXIT_FAILED) from None
    return EXIT_OK


async def logs(args: argparse.Namespace, cfg: Config) -> int:
    printed = False
    async with cluster_of(args, cfg) as cluster:
        try:
            async for line in cluster.get_run(args.run_id).logs(args.follow, args.timestamps):
                print(line, flush=True)
                printed = True
        except (remote.RequestFailed, LookupError) as exc:
            raise CliError(str(exc), EXIT_FAILED) from None
    if not printed:  # on stderr: `satind logs RUN > file` gets the lines only
        print("(no output)", file=sys.stderr)
    return EXIT_OK


async def cancel(args: argparse.Namespace, cfg: Config) -> int:
    async with cluster_of(args, cfg) as cluster:
        try:
            await cluster.get_run(args.run_id).cancel()
        except NotAllowed:
            raise  # said as such by the command line (cli/__init__.py)
        except Refused as exc:
            raise CliError(str(exc), EXIT_FAILED) from None
    print(f"cancelled {args.run_id}")
    return EXIT_OK


async def result(args: argparse.Namespace, cfg: Config) -> int:
    async with connected(args, cfg) as client:
        reply = await client.fetch_result(args.run_id, args.wait, cfg.client.timeout_s)
        status = await _status_or_none(client) if reply.result is not None else None
        plugin_name, argv = _plugin_and_argv(status, args.run_id)
        if reply.result is not None and not plugin_name:
            # A run from before a restart: the run history knows its plugin.
            plugin_name, argv = await _plugin_from_history(client, args.run_id)
    if reply.result is None:
        raise CliError(reply.error or f"no result for {args.run_id}", EXIT_FAILED)
    # The arguments come from the peers here, not from the user: output files are written
    # only where the user says, under their base names.
    saved = save_into(reply.result, args.outputs) if args.outputs is not None else None
    return show_result(reply.result, plugin_name, argv, args.json, cfg, saved)


def _print_run_id(run_id: str, as_json: bool) -> int:
    print(json.dumps({"run_id": run_id}) if as_json else run_id)
    return EXIT_OK


async def _status_or_none(client: remote.Client) -> m.StatusReply | None:
    """The system's status, for a run's plugin and arguments; None if the peer went away
    (the result is printed anyway)."""
    try:
        return await client.status()
    except (remote.PeerUnavailable, remote.RequestFailed):
        return None


async def _plugin_from_history(client: remote.Client, run_id: str) -> tuple[str, list[str]]:
    try:
        reply = await client.history(run_id)
    except (remote.PeerUnavailable, remote.RequestFailed):
        return "", []
    found = [r for r in reply.runs if r.run_id == run_id]
    return (found[0].plugin, list(found[0].argv)) if found else ("", [])


def _plugin_and_argv(status: m.StatusReply | None, run_id: str) -> tuple[str, list[str]]:
    """A run's plugin and arguments from a status reply (for printing its result)."""
    for run in status.runs if status else []:
        if run.run_id == run_id:
            return run.plugin, list(run.argv)
    return "", []
