"""The ``satind`` command.

Exit codes: 0 success; 1 the plugin raised or its result failed its check (the message carries
the remote traceback); 2 usage error (unknown plugin, bad arguments, bad options); 3 the
runtime itself failed (a peer did not start, a connection was lost).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from satind import config as config_mod
from satind._trio import run_flat
from satind import plugin as plugins

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_RUNTIME = 3

# The counters every run reports, in the order the summary prints them.
STAT_NAMES = (
    "spawns",
    "syncs",
    "jobs_run",
    "steal_attempts_local",
    "steal_attempts_wide",
    "stolen_local",
    "stolen_wide",
    "messages",
    "bytes",
)


class CliError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(
        prog="satind",
        description=(
            "satind runs divide-and-conquer Python programs (plugins) over peers that steal "
            "work from each other. `satind run PLUGIN ARGS` starts local peers, runs the "
            "plugin and stops them."
        ),
    )
    parser.add_argument("--log-level", default="WARNING", help="peer and client log level")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run a plugin on local peers and print the result",
        description=(
            "Start N local peer processes on 127.0.0.1, run PLUGIN with ARGS on them, print "
            "the result and a statistics summary, stop every peer. Options may come before or "
            "after the plugin's arguments; put plugin arguments that start with '-' after '--'."
        ),
    )
    run.add_argument("plugin", metavar="PLUGIN", help="plugin name (see `satind plugins`)")
    run.add_argument("args", metavar="ARGS", nargs="*", help="the plugin's arguments")
    run.add_argument(
        "--peers",
        type=int,
        default=None,
        help="number of peer processes (default: one per core, here "
        f"{config_mod.default_peer_count()})",
    )
    run.add_argument(
        "--clusters",
        type=int,
        default=1,
        help="spread the peers over this many cluster labels (default 1)",
    )
    run.add_argument(
        "--steal",
        choices=["rs", "crs"],
        default=None,
        help="work stealing: rs = random, crs = cluster-aware random (default: from config, crs)",
    )
    run.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    run.add_argument(
        "--plugin-path",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="also load plugins from every *.py in DIR (repeatable)",
    )
    run.add_argument("--config", type=Path, help="TOML config file (see configs/)")
    run.add_argument("--seed", type=int, help="seed the peers' victim choice")
    run.add_argument(
        "--no-check", action="store_true", help="skip the plugin's independent result check"
    )

    plist = sub.add_parser("plugins", help="list the available plugins")
    plist.add_argument("--plugin-path", type=Path, action="append", default=[], metavar="DIR")
    return parser, {"run": run, "plugins": plist}


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run_cli(list(sys.argv[1:] if argv is None else argv)))


def run_cli(argv: list[str]) -> int:
    parser, commands = _parser()
    # The top level knows the global options and the command; each command's own parser
    # then reads its arguments intermixed, so options may follow the plugin's arguments.
    try:
        at = _command_index(argv, commands)
        top = parser.parse_args(argv[:at])  # global options only (and --help)
        if at == len(argv):
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        args = commands[argv[at]].parse_intermixed_args(argv[at + 1 :])
        args.command = argv[at]
        args.log_level = top.log_level
    except SystemExit as exc:
        return int(exc.code or 0) if exc.code in (0, None) else EXIT_USAGE
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s client %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        if args.command == "run":
            return _cmd_run(args)
        if args.command == "plugins":
            return _cmd_plugins(args)
        parser.print_help()
        return EXIT_USAGE
    except CliError as exc:
        print(f"satind: {exc}", file=sys.stderr)
        return exc.code


def _command_index(argv: list[str], commands: dict[str, argparse.ArgumentParser]) -> int:
    """Position of the command word (the first argument naming a command), or the end."""
    for i, word in enumerate(argv):
        if word in commands:
            return i
    return len(argv)


def _cmd_plugins(args: argparse.Namespace) -> int:
    for name, plugin in sorted(plugins.discover(args.plugin_path).items()):
        print(f"{name:12} {plugin.usage:40} {plugin.description}")
    return EXIT_OK


def _resolve_plugin(name: str, argv: list[str], paths: Sequence[Path]) -> plugins.Plugin:
    try:
        plugin = plugins.find(name, paths)
    except plugins.UnknownPlugin as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except FileNotFoundError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    try:
        plugin.parse_args(argv)
    except plugins.UsageError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    return plugin


def _cmd_run(args: argparse.Namespace) -> int:
    from satind.launcher import StartupError
    from satind.runner import LocalRun, RunFailed, run_local

    try:
        cfg = config_mod.load(args.config)
    except config_mod.ConfigError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    plugin = _resolve_plugin(args.plugin, args.args, args.plugin_path)
    peers = args.peers if args.peers is not None else config_mod.default_peer_count()
    if peers < 1:
        raise CliError("--peers must be at least 1", EXIT_USAGE)
    if not 1 <= args.clusters <= peers:
        raise CliError(f"--clusters must be between 1 and --peers ({peers})", EXIT_USAGE)
    steal = args.steal or cfg.steal.algorithm
    show_progress = not args.json and sys.stderr.isatty()
    try:
        outcome = run_flat(
            run_local,
            LocalRun(
                plugin=plugin,
                argv=args.args,
                peers=peers,
                clusters=args.clusters,
                steal=steal,
                plugin_paths=args.plugin_path,
                config_file=args.config,
                log_level=args.log_level,
                seed=args.seed,
                show_progress=show_progress,
            ),
            cfg,
        )
    except StartupError as exc:
        raise CliError(f"peers did not start: {exc}", EXIT_RUNTIME) from None
    except RunFailed as exc:
        raise CliError(str(exc), exc.code) from None
    except KeyboardInterrupt:
        print("satind: interrupted; every peer was stopped", file=sys.stderr)
        return 130
    report: dict[str, Any] = {
        "run_id": outcome.run_id,
        "plugin": plugin.name,
        "args": list(args.args),
        "result": plugin.make_report(args.args, outcome.value),
        "elapsed_s": round(outcome.elapsed_s, 6),
        "peers": outcome.peers,
        "clusters": args.clusters,
        "steal": steal,
        "stats": outcome.stats,
    }
    check_error = None
    if plugin.check is not None and not args.no_check:
        try:
            plugin.check(plugin.parse_args(args.args), outcome.value)
            report["check"] = "ok"
        except Exception as exc:
            check_error = f"{type(exc).__name__}: {exc}"
            report["check"] = f"failed: {check_error}"
    else:
        report["check"] = "skipped"
    if args.json:
        print(json.dumps(report))
    else:
        _print_summary(report)
    if check_error is not None:
        print(f"satind: the result failed the plugin's check: {check_error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _print_summary(report: dict[str, Any]) -> None:
    stats = report["stats"]
    print(f"result: {report['result']}")
    print(
        f"run {report['run_id']}: {report['plugin']} {' '.join(report['args'])} on "
        f"{report['peers']} peers ({report['clusters']} cluster(s), {report['steal']}) "
        f"in {report['elapsed_s']:.3f} s; check {report['check']}"
    )
    parts = [f"{name.replace('_', ' ')} {int(stats.get(name, 0)):,}" for name in STAT_NAMES]
    print("  " + " · ".join(parts))


if __name__ == "__main__":
    main()
