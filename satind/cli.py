"""The ``satind`` command.

Exit codes: 0 success; 1 the plugin raised or its result failed its check (the message carries
the remote traceback); 2 usage error (unknown plugin, bad arguments, bad options or config);
3 the runtime failed (a peer did not start or answer, a connection was lost).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from satind import config as config_mod
from satind import plugin as plugins
from satind._trio import run_flat

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
# Recovery counters (satin-fault-tolerance §3): printed when a fault made any of them nonzero.
RECOVERY_STAT_NAMES = (
    "jobs_restarted",
    "tuples_sent",
    "tuples_received",
    "orphan_table_size",
    "results_reused",
    "leaves_redone",
)


class CliError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _client_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--to",
        metavar="HOST:PORT",
        help="a peer of the system (default: $SATIND_TO, else [client] to in the config)",
    )
    p.add_argument(
        "--keys",
        metavar="DIR",
        help="keys directory with ca.pem and a client certificate "
        "(default: $SATIND_KEYS, else [client] keys in the config)",
    )
    p.add_argument(
        "--as",
        dest="as_name",
        metavar="NAME",
        help="the client certificate's name (default: [client] name, 'client')",
    )
    p.add_argument("--config", type=Path, help="TOML config file")


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _log_level(text: str) -> str:
    level = text.upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"unknown log level {text!r}; use one of {', '.join(LOG_LEVELS)}"
        )
    return level


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(
        prog="satind",
        description=(
            "satind runs divide-and-conquer Python programs (plugins) over peers that steal "
            "work from each other. `satind run PLUGIN ARGS` starts local peers, runs the "
            "plugin and stops them; `satind start` runs a machine's peers as a daemon that "
            "`submit`, `status`, `drain` and `stop` talk to."
        ),
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        type=_log_level,
        metavar="LEVEL",
        help="peer and client log level: DEBUG, INFO, WARNING (default), ERROR or CRITICAL",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands: dict[str, argparse.ArgumentParser] = {}

    run = commands["run"] = sub.add_parser(
        "run",
        help="run a plugin on local peers and print the result",
        description=(
            "Start N local peer processes on 127.0.0.1 (mutual TLS with a throw-away CA), run "
            "PLUGIN with ARGS on them, print the result and a statistics summary, stop every "
            "peer. Options may come before or after the plugin's arguments; put plugin "
            "arguments that start with '-' after '--'."
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
        help="work stealing: rs = random, crs = cluster-aware random (default: config, crs)",
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
    run.add_argument("--seed", type=int, help="seed the peers' random choices")
    run.add_argument(
        "--no-check", action="store_true", help="skip the plugin's independent result check"
    )

    plist = commands["plugins"] = sub.add_parser("plugins", help="list the available plugins")
    plist.add_argument("--plugin-path", type=Path, action="append", default=[], metavar="DIR")

    start = commands["start"] = sub.add_parser(
        "start",
        help="run this machine's peers in the foreground (the daemon)",
        description=(
            "Start and supervise this machine's peers: NAME/0 ... NAME/N-1 on ports PORT, "
            "PORT+1, ... They join the system through the seeds. SIGTERM or Ctrl-C stops them "
            "gracefully. Every option defaults to the [daemon] section of the config."
        ),
    )
    start.add_argument("--config", type=Path, help="TOML config file (see configs/)")
    start.add_argument("--listen", metavar="HOST:PORT", help="address of peer 0")
    start.add_argument("--seeds", metavar="HOST:PORT,...", help="peers of other machines")
    start.add_argument("--cluster", help="this machine's cluster label")
    start.add_argument("--peers", type=int, help="number of peers (default: one per core)")
    start.add_argument("--keys", metavar="DIR", help="keys directory (see `satind keys`)")
    start.add_argument("--name", help="this machine's name (its certificate's; default: host)")
    start.add_argument("--plugin-path", action="append", default=[], metavar="DIR")
    start.add_argument(
        "--checkpoint-dir",
        type=Path,
        metavar="DIR",
        help="write checkpoint logs of finished results here (a local disk, or a mount every "
        "machine shares), so that runs survive the loss of every peer (`satind resume`)",
    )
    start.add_argument(
        "--checkpoint-interval",
        type=float,
        metavar="SECONDS",
        help="seconds between checkpoints (default: [checkpoint] interval_s, 10)",
    )

    submit = commands["submit"] = sub.add_parser(
        "submit",
        help="submit a run to a daemon; prints its run id",
        description="Submit PLUGIN ARGS to the peer at --to, which becomes the run's master.",
    )
    submit.add_argument("plugin", metavar="PLUGIN")
    submit.add_argument("args", metavar="ARGS", nargs="*")
    submit.add_argument(
        "--wait", action="store_true", help="wait for the result and print it as `satind run` does"
    )
    submit.add_argument("--json", action="store_true", help="JSON output")
    submit.add_argument("--plugin-path", type=Path, action="append", default=[], metavar="DIR")
    _client_options(submit)

    result = commands["result"] = sub.add_parser("result", help="fetch a run's result")
    result.add_argument("run_id", metavar="RUN_ID")
    result.add_argument("--wait", action="store_true", help="wait until the run ends")
    result.add_argument("--json", action="store_true")
    result.add_argument("--plugin-path", type=Path, action="append", default=[], metavar="DIR")
    _client_options(result)

    resume = commands["resume"] = sub.add_parser(
        "resume",
        help="resume a run from checkpoint logs (after every peer was lost, or elsewhere)",
        description="The peer at --to loads every log in its [checkpoint] dir, becomes the "
        "run's master under a new epoch and respawns the root; checkpointed results are "
        "reused (stats.results_reused) instead of computed.",
    )
    resume.add_argument("run_id", metavar="RUN_ID")
    resume.add_argument("--wait", action="store_true", help="wait for the result")
    resume.add_argument("--json", action="store_true", help="JSON output, as `satind run --json`")
    resume.add_argument("--plugin-path", type=Path, action="append", default=[], metavar="DIR")
    _client_options(resume)

    suspend = commands["suspend"] = sub.add_parser(
        "suspend",
        help="checkpoint and stop a run; `satind resume` continues it, here or elsewhere",
        description="The run's master stops it; every peer writes what it finished for it to "
        "its checkpoint log. Needs peers started with --checkpoint-dir.",
    )
    suspend.add_argument("run_id", metavar="RUN_ID")
    _client_options(suspend)

    status = commands["status"] = sub.add_parser(
        "status",
        help="peers and runs of the system",
        description="One line per peer (state alive/suspect/dead/left/draining) and per run.",
    )
    status.add_argument("--watch", action="store_true", help="a live view, until Ctrl-C")
    status.add_argument("--json", action="store_true")
    _client_options(status)

    drain = commands["drain"] = sub.add_parser(
        "drain",
        help="drain peers: stop taking work, finish it, leave",
    )
    drain.add_argument("peer", metavar="PEER_ID", nargs="?")
    drain.add_argument("--cluster", help="drain every peer of this cluster")
    _client_options(drain)

    stop = commands["stop"] = sub.add_parser(
        "stop",
        help="stop the daemon's machine (its peers leave and exit)",
    )
    stop.add_argument("--all", action="store_true", help="stop every member of the system")
    stop.add_argument(
        "--drain",
        action="store_true",
        help="drain first: each peer finishes its work and hands its finished results to a "
        "peer that stays before it leaves (no work is lost; see `satind drain`)",
    )
    _client_options(stop)

    keys = commands["keys"] = sub.add_parser(
        "keys",
        help="make a cluster CA and certificates",
        description=(
            "`satind keys init DIR` makes a cluster CA and a client certificate 'client'; "
            "`satind keys issue DIR NAME` a node certificate for machine NAME; "
            "`--client` a client certificate. Keys are written 0600."
        ),
    )
    keys.add_argument("action", choices=["init", "issue"])
    keys.add_argument("directory", type=Path, metavar="DIR")
    keys.add_argument("name", nargs="?", metavar="NAME")
    keys.add_argument("--client", action="store_true", help="issue a client certificate")

    sim = commands["simulate"] = sub.add_parser(
        "simulate",
        help="run a scenario in the deterministic simulator",
        description=(
            "Run SCENARIO.toml (see configs/scenarios/): real peer code on an in-memory network "
            "in virtual time, with the scenario's faults. Prints the virtual makespan, work done "
            "and redone, steals, messages, membership convergence and whether every invariant "
            "held; the same scenario and seed always give the same trace_hash. Exit code 1 when "
            "an invariant failed."
        ),
    )
    sim.add_argument("scenario", type=Path, metavar="SCENARIO.toml")
    sim.add_argument("--seed", type=int, help="override the scenario's seed")
    sim.add_argument("--json", action="store_true", help="print one JSON object")

    cfg = commands["config"] = sub.add_parser("config", help="show the effective configuration")
    cfg.add_argument("action", choices=["show"])
    cfg.add_argument("--config", type=Path, help="TOML config file")
    return parser, commands


def main(argv: Sequence[str] | None = None) -> None:
    try:
        code = run_cli(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()
    except BrokenPipeError:
        # Output piped into `head` and the like: the reader left, which is not an error of
        # ours. Point stdout at /dev/null so that the flush at exit does not complain again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_OK
    sys.exit(code)


def run_cli(argv: list[str]) -> int:
    parser, commands = _parser()
    # The top level knows the global options and the command; each command's own parser then
    # reads its arguments intermixed, so options may follow the plugin's arguments.
    try:
        at = _command_index(argv, commands)
        top = parser.parse_args(argv[:at])  # global options only (and --help)
        if at == len(argv):
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        command = argv[at]
        sub = commands[command]
        if command in ("run", "submit"):
            args = sub.parse_intermixed_args(argv[at + 1 :])
        else:
            args = sub.parse_args(argv[at + 1 :])
        args.command = command
        args.log_level = top.log_level
    except SystemExit as exc:
        return int(exc.code or 0) if exc.code in (0, None) else EXIT_USAGE
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        handler = {
            "run": _cmd_run,
            "plugins": _cmd_plugins,
            "start": _cmd_start,
            "keys": _cmd_keys,
            "config": _cmd_config,
            "simulate": _cmd_simulate,
        }.get(command)
        if handler is None:
            from satind import commands as client_commands

            return client_commands.dispatch(args)
        return handler(args)
    except CliError as exc:
        print(f"satind: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("satind: interrupted", file=sys.stderr)
        return 130


def _command_index(argv: list[str], commands: dict[str, argparse.ArgumentParser]) -> int:
    """Position of the command word (the first argument naming a command), or the end."""
    for i, word in enumerate(argv):
        if word in commands:
            return i
    return len(argv)


def load_config(path: Path | None) -> config_mod.Config:
    try:
        return config_mod.load(path)
    except config_mod.ConfigError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def _cmd_plugins(args: argparse.Namespace) -> int:
    for name, plugin in sorted(plugins.discover(args.plugin_path).items()):
        print(f"{name:12} {plugin.usage:40} {plugin.description}")
    return EXIT_OK


def _cmd_config(args: argparse.Namespace) -> int:
    print(config_mod.to_toml(load_config(args.config)), end="")
    return EXIT_OK


def _cmd_simulate(args: argparse.Namespace) -> int:
    from satind.sim.scenario import ScenarioError, load
    from satind.sim.simulator import simulate

    try:
        scenario = load(args.scenario)
    except ScenarioError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    if args.log_level.upper() == "WARNING":
        # Simulated faults make peers log what a real operator should hear about; here they
        # are the experiment, and the report says what happened.
        logging.getLogger("satind").setLevel(logging.ERROR)
    report = simulate(scenario, args.seed)
    if args.json:
        print(json.dumps(report.as_dict()))
    else:
        verdict = "all invariants held" if report.invariants_ok else "INVARIANTS VIOLATED"
        makespan = "-" if report.makespan_s is None else f"{report.makespan_s:.3f} s"
        print(f"{report.scenario} (seed {report.seed}, {report.peers} peers): {verdict}")
        print(
            f"  makespan {makespan} virtual · work {report.work_s:.2f} s, redone "
            f"{report.redone_s:.2f} s · leaves {report.leaves_run:,} run, "
            f"{report.leaves_unique:,} distinct of {report.leaves_expected:,}"
        )
        print(
            f"  steals local {report.stolen_local:,}/{report.steal_attempts_local:,} · wide "
            f"{report.stolen_wide:,}/{report.steal_attempts_wide:,} · messages "
            f"{report.messages:,} ({report.bytes:,} bytes, {report.messages_dropped:,} dropped)"
        )
        print(
            f"  recovery: jobs restarted {report.jobs_restarted:,} · tuples sent "
            f"{report.tuples_sent:,} · results reused {report.results_reused:,} · drained "
            f"leaves redone {report.drained_redone:,}"
        )
        if report.checkpoint_bytes:
            covered = report.leaves_checkpointed
            reused = covered - report.checkpointed_redone
            share = f" ({reused / covered:.0%})" if covered else ""
            print(
                f"  checkpoints: {report.checkpoint_bytes:,} bytes written · leaves covered at "
                f"the resume {covered:,}, reused {reused:,}{share} · leaves run after the "
                f"resume {report.leaves_after_resume:,}"
            )
        conv = "-" if report.convergence_s is None else f"{report.convergence_s:.2f} s"
        print(
            f"  membership converged at {conv} · {report.virtual_s:.1f} virtual s in "
            f"{report.wall_s:.1f} wall s · trace {report.trace_hash[:16]} "
            f"({report.trace_events:,} events)"
        )
        for violation in report.violations:
            print(f"  violation: {violation}")
    return EXIT_OK if report.invariants_ok else EXIT_FAILED


def _cmd_keys(args: argparse.Namespace) -> int:
    from satind.net import tls

    try:
        if args.action == "init":
            ca = tls.init_ca(args.directory)
            tls.issue(args.directory, "client", client=True)
            print(f"made a cluster CA ({ca}) and a client certificate 'client' in {args.directory}")
            print(f"next: satind keys issue {args.directory} MACHINE  (once per machine)")
            return EXIT_OK
        if not args.name:
            raise CliError("satind keys issue DIR NAME: give the certificate's NAME", EXIT_USAGE)
        cert, key = tls.issue(args.directory, args.name, client=args.client)
        print(f"issued {'client' if args.client else 'node'} certificate {cert} (key {key})")
        return EXIT_OK
    except tls.KeysError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def _cmd_start(args: argparse.Namespace) -> int:
    from satind.daemon import DaemonError, Supervisor
    from satind.net import tls
    from satind.net.transport import parse_address

    cfg = load_config(args.config)
    d = cfg.daemon
    changes: dict[str, Any] = {}
    try:
        if args.listen:
            address = parse_address(args.listen)
            changes.update(host=address.host, port=address.port)
        if args.seeds:
            changes["seeds"] = [s for s in args.seeds.split(",") if s]
            for seed in changes["seeds"]:
                parse_address(seed)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    for name in ("cluster", "peers", "keys", "name"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    if args.plugin_path:
        changes["plugin_paths"] = [*d.plugin_paths, *args.plugin_path]
    if changes.get("peers", 1) < 0:
        raise CliError("--peers must be at least 1", EXIT_USAGE)
    cfg = dataclasses.replace(cfg, daemon=dataclasses.replace(d, **changes))
    checkpoint: dict[str, Any] = {}
    if args.checkpoint_dir is not None:
        checkpoint["dir"] = str(args.checkpoint_dir.resolve())
    if args.checkpoint_interval is not None:
        if args.checkpoint_interval <= 0:
            raise CliError("--checkpoint-interval must be a positive number of seconds", EXIT_USAGE)
        checkpoint["interval_s"] = args.checkpoint_interval
    cfg = dataclasses.replace(cfg, checkpoint=dataclasses.replace(cfg.checkpoint, **checkpoint))
    try:
        supervisor = Supervisor(cfg, args.log_level)
        return int(run_flat(supervisor.run))
    except (DaemonError, tls.KeysError) as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def _resolve_plugin(name: str, argv: list[str], paths: Sequence[Path]) -> plugins.Plugin:
    try:
        plugin = plugins.find(name, paths)
    except (plugins.UnknownPlugin, FileNotFoundError) as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    try:
        plugin.parse_args(argv)
    except plugins.UsageError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except plugins.PluginFailed as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    return plugin


def _cmd_run(args: argparse.Namespace) -> int:
    from satind.launcher import StartupError
    from satind.runner import LocalRun, RunFailed, run_local

    cfg = load_config(args.config)
    plugin = _resolve_plugin(args.plugin, args.args, args.plugin_path)
    peers = args.peers if args.peers is not None else config_mod.default_peer_count()
    if peers < 1:
        raise CliError("--peers must be at least 1", EXIT_USAGE)
    if not 1 <= args.clusters <= peers:
        raise CliError(f"--clusters must be between 1 and --peers ({peers})", EXIT_USAGE)
    steal = args.steal or cfg.steal.algorithm
    cfg = dataclasses.replace(cfg, steal=dataclasses.replace(cfg.steal, algorithm=steal))
    request = LocalRun(
        plugin=plugin,
        argv=args.args,
        peers=peers,
        clusters=args.clusters,
        plugin_paths=args.plugin_path,
        log_level=args.log_level,
        seed=args.seed,
        show_progress=not args.json and sys.stderr.isatty(),
    )
    try:
        outcome = run_flat(run_local, request, cfg)
    except StartupError as exc:
        raise CliError(f"peers did not start: {exc}", EXIT_RUNTIME) from None
    except RunFailed as exc:
        raise CliError(str(exc), exc.code) from None
    except KeyboardInterrupt:
        print("satind: interrupted; every peer was stopped", file=sys.stderr)
        return 130
    report = run_report(
        plugin,
        args.args,
        outcome.run_id,
        outcome.value,
        outcome.elapsed_s,
        outcome.peers,
        outcome.stats,
        check=not args.no_check,
    )
    report.update(clusters=args.clusters, steal=steal)
    return print_report(report, args.json)


def run_report(
    plugin: plugins.Plugin | None,
    argv: Sequence[str],
    run_id: str,
    value: Any,
    elapsed_s: float,
    peers: int,
    stats: dict[str, Any],
    check: bool = True,
) -> dict[str, Any]:
    """The run JSON: the same for `satind run`, `submit --wait` and `result`."""
    report: dict[str, Any] = {
        "run_id": run_id,
        "plugin": plugin.name if plugin else "",
        "args": list(argv),
        "result": plugin.make_report(argv, value) if plugin else value,
        "elapsed_s": round(elapsed_s, 6),
        "peers": peers,
        "stats": stats,
        "check": "skipped",
    }
    if plugin is not None and plugin.check is not None and check:
        try:
            plugin.check(plugin.parse_args(argv), value)
            report["check"] = "ok"
        except Exception as exc:
            report["check"] = f"failed: {type(exc).__name__}: {exc}"
    return report


def print_report(report: dict[str, Any], as_json: bool) -> int:
    if as_json:
        print(json.dumps(report, default=_jsonable))
    else:
        stats = report["stats"]
        print(f"result: {report['result']}")
        where = f"{report['peers']} peers"
        if "clusters" in report:
            where += f" ({report['clusters']} cluster(s), {report['steal']})"
        print(
            f"run {report['run_id']}: {report['plugin']} {' '.join(report['args'])} on "
            f"{where} in {report['elapsed_s']:.3f} s; check {report['check']}"
        )
        parts = [f"{name.replace('_', ' ')} {int(stats.get(name, 0)):,}" for name in STAT_NAMES]
        print("  " + " · ".join(parts))
        if any(stats.get(name) for name in RECOVERY_STAT_NAMES):
            parts = [f"{n.replace('_', ' ')} {int(stats.get(n, 0)):,}" for n in RECOVERY_STAT_NAMES]
            print("  recovery: " + " · ".join(parts))
    if report["check"].startswith("failed"):
        print(
            f"satind: the result failed the plugin's check: {report['check'][8:]}", file=sys.stderr
        )
        return EXIT_FAILED
    return EXIT_OK


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def env_default(flag: str | None, env: str, configured: str) -> str:
    return flag or os.environ.get(env) or configured


if __name__ == "__main__":
    main()
