"""Client commands of a running system: submit, result, status, drain, stop.

Each connects to the peer at ``--to`` with the client certificate from ``--keys`` (defaults:
``$SATIND_TO``/``$SATIND_KEYS``, then the ``[client]`` section of the config), asks, prints, and
disconnects.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from satind import control
from satind import plugin as plugins
from satind._trio import run_flat
from satind.cli import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_RUNTIME,
    EXIT_USAGE,
    CliError,
    env_default,
    load_config,
    print_report,
    run_report,
)
from satind.config import Config
from satind.net import codec, tls
from satind.net import messages as m
from satind.net.transport import parse_address


def dispatch(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    handler = {
        "submit": _submit,
        "result": _result,
        "resume": _resume,
        "suspend": _suspend,
        "status": _status,
        "drain": _drain,
        "stop": _stop,
    }[args.command]
    try:
        return int(run_flat(handler, args, cfg))
    except (control.PeerUnavailable, control.RequestFailed) as exc:
        raise CliError(str(exc), EXIT_RUNTIME) from None
    except plugins.PluginFailed as exc:
        raise CliError(str(exc), EXIT_FAILED) from None


@asynccontextmanager
async def _client(args: argparse.Namespace, cfg: Config) -> AsyncIterator[control.Client]:
    to = env_default(args.to, "SATIND_TO", cfg.client.to)
    keys = env_default(args.keys, "SATIND_KEYS", cfg.client.keys)
    if not keys:
        raise CliError(
            "no keys: pass --keys DIR or set SATIND_KEYS (make them with `satind keys init DIR`)",
            EXIT_USAGE,
        )
    try:
        address = parse_address(to)
        credentials = tls.Credentials.load(
            Path(keys), args.as_name or cfg.client.name, tls.ROLE_CLIENT
        )
    except (ValueError, tls.KeysError) as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    async with control.connect(address, cfg, credentials if cfg.net.tls else None) as client:
        yield client


def _local_plugin(name: str, paths: list[Path]) -> plugins.Plugin | None:
    """The plugin, when this machine has it too (for reports and checks); else None."""
    try:
        return plugins.find(name, paths)
    except (plugins.UnknownPlugin, FileNotFoundError):
        return None


def _show_result(
    result: m.RunResult,
    plugin_name: str,
    argv: list[str],
    paths: list[Path],
    as_json: bool,
    cfg: Config,
) -> int:
    if result.error is not None:
        err = result.error
        print(
            f"satind: run {result.run_id} failed: {err.type}: {err.message}\n"
            f"{err.traceback.rstrip()}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    assert result.value is not None
    value = codec.decode_value(result.value, cfg.net.max_depth)
    plugin = _local_plugin(plugin_name, paths)
    report = run_report(
        plugin, argv, result.run_id, value, result.elapsed_s, result.peers, dict(result.stats)
    )
    if plugin is None:
        report["plugin"] = plugin_name
    return print_report(report, as_json)


async def _submit(args: argparse.Namespace, cfg: Config) -> int:
    plugin = _local_plugin(args.plugin, args.plugin_path)
    if plugin is not None:
        try:
            plugin.parse_args(args.args)  # report usage errors before bothering the system
        except plugins.UsageError as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
    async with _client(args, cfg) as client:
        try:
            run_id = await client.submit(
                args.plugin, list(args.args), plugin.code_hash if plugin else ""
            )
        except (plugins.UsageError, plugins.UnknownPlugin) as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
        except control.SubmitRefused as exc:
            raise CliError(f"run refused: {exc}", EXIT_RUNTIME) from None
        if not args.wait:
            print(json.dumps({"run_id": run_id}) if args.json else run_id)
            return EXIT_OK
        result = await _wait_or_follow(client, run_id, cfg)
    return _show_result(result, args.plugin, list(args.args), args.plugin_path, args.json, cfg)


async def _wait_or_follow(client: control.Client, run_id: str, cfg: Config) -> m.RunResult:
    """The run's result: from the peer it was submitted to, or, when that peer is lost (a
    crash; the run goes on under an elected master), through the other members."""
    try:
        return await client.result(run_id)
    except control.PeerUnavailable as exc:
        print(f"satind: {exc}; following run {run_id} through the other peers", file=sys.stderr)
    try:
        return await control.follow_result(
            run_id, client.follow_addresses(), cfg, client.transport.credentials
        )
    except control.RunLost as exc:
        raise CliError(str(exc), EXIT_RUNTIME) from None


async def _resume(args: argparse.Namespace, cfg: Config) -> int:
    async with _client(args, cfg) as client:
        try:
            run_id = await client.resume(args.run_id)
        except control.SubmitRefused as exc:
            raise CliError(f"resume refused: {exc}", EXIT_RUNTIME) from None
        if not args.wait:
            print(json.dumps({"run_id": run_id}) if args.json else run_id)
            return EXIT_OK
        result = await _wait_or_follow(client, run_id, cfg)
        status = await client.status()
    plugin_name, argv = _plugin_and_argv(status, run_id)
    return _show_result(result, plugin_name, argv, args.plugin_path, args.json, cfg)


async def _suspend(args: argparse.Namespace, cfg: Config) -> int:
    async with _client(args, cfg) as client:
        reply = await client.control(m.SuspendRequest(client.requests.new(), args.run_id), 60.0)
    if not reply.ok:
        raise CliError(reply.message, EXIT_FAILED)
    print(reply.message)
    return EXIT_OK


async def _result(args: argparse.Namespace, cfg: Config) -> int:
    async with _client(args, cfg) as client:
        reply = await client.fetch_result(args.run_id, args.wait, cfg.client.timeout_s)
        status = await client.status() if reply.result is not None else None
    if reply.result is None:
        raise CliError(reply.error or f"no result for {args.run_id}", EXIT_FAILED)
    plugin_name, argv = _plugin_and_argv(status, args.run_id)
    return _show_result(reply.result, plugin_name, argv, args.plugin_path, args.json, cfg)


def _plugin_and_argv(status: m.StatusReply | None, run_id: str) -> tuple[str, list[str]]:
    """A run's plugin and arguments from a status reply (for printing its result)."""
    for run in status.runs if status else []:
        if run.run_id == run_id:
            return run.plugin, list(run.argv)
    return "", []


def status_json(reply: m.StatusReply) -> dict[str, Any]:
    return {
        "peers": [vars(p) for p in reply.peers],
        "runs": [
            {**vars(r), "progress": round(r.progress, 4), "elapsed_s": round(r.elapsed_s, 3)}
            for r in reply.runs
        ],
    }


async def _status(args: argparse.Namespace, cfg: Config) -> int:
    async with _client(args, cfg) as client:
        if args.watch:
            from satind.console import watch_status

            await watch_status(client, cfg)
            return EXIT_OK
        reply = await client.status()
    if args.json:
        print(json.dumps(status_json(reply)))
        return EXIT_OK
    from satind.console import print_status

    print_status(reply)
    return EXIT_OK


async def _drain(args: argparse.Namespace, cfg: Config) -> int:
    if bool(args.peer) == bool(args.cluster):
        raise CliError("give either PEER_ID or --cluster NAME", EXIT_USAGE)
    async with _client(args, cfg) as client:
        msg = m.DrainRequest(
            client.requests.new(), [args.peer] if args.peer else [], args.cluster or ""
        )
        reply = await client.control(msg)
    if not reply.ok:
        raise CliError(reply.message, EXIT_FAILED)
    print(f"{reply.message}: {', '.join(reply.affected)}")
    return EXIT_OK


async def _stop(args: argparse.Namespace, cfg: Config) -> int:
    async with _client(args, cfg) as client:
        reply = await client.control(m.StopRequest(client.requests.new(), args.all, args.drain))
    print(f"{reply.message}: {', '.join(reply.affected)}")
    return EXIT_OK if reply.ok else EXIT_FAILED
