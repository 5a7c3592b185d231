"""The ``satind`` command's arguments: one parser per command, with help that explains."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from satind import __version__, _native
from satind import config as config_mod
from satind.cli.argtypes import log_level, run_id, weight
from satind.cli.parser_start import add_start, heuristic_option


def _version() -> str:
    """``satind --version``: the version, and whether the hot path runs compiled (setup.py)."""
    compiled = _native.compiled()
    how = f"engine compiled ({len(compiled)} modules, mypyc)" if compiled else "pure Python"
    return f"satind {__version__}, {how}"


def deadline_option(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--deadline",
        metavar="S",
        type=float,
        default=None,
        help="seconds the drained peers go on finishing their work; then each leaves at once "
        "(the paper's leave): its unfinished work is cut, what it finished goes to the peers "
        "that gave it the work, and they compute the rest again. 0: leave now. Default: each "
        f"peer's [daemon] drain_deadline_s ({config_mod.DEFAULT.daemon.drain_deadline_s:g})",
    )


def client_options(p: argparse.ArgumentParser) -> None:
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


def build() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
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
        default=None,
        type=log_level,
        metavar="LEVEL",
        help="peer and client log level: DEBUG, INFO, WARNING, ERROR or CRITICAL (default: "
        "INFO for `satind start`, whose log says when peers start, stop and take runs; "
        "WARNING for every other command)",
    )
    parser.add_argument("--version", action="version", version=_version())
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
    heuristic_option(run)
    run.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    run.add_argument(
        "--plugin-path",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="also load the plugin files in DIR: each *.py there that assigns PLUGIN at its "
        "top level (repeatable; docs/plugins.md)",
    )
    run.add_argument("--config", type=Path, help="TOML config file (see configs/)")
    run.add_argument("--seed", type=int, help="seed the peers' random choices")
    run.add_argument(
        "--no-check", action="store_true", help="skip the plugin's independent result check"
    )
    run.add_argument(
        "--trace",
        type=Path,
        metavar="FILE",
        help="write the run's trace to FILE (Chrome trace-event JSON: a track per peer with "
        "its jobs, sync waits, steals and recovery events; open it in https://ui.perfetto.dev)",
    )

    plist = commands["plugins"] = sub.add_parser(
        "plugins",
        help="list the plugins here, or each member's (--to); reload the daemons' plugins",
        description="Without --to (or $SATIND_TO): the plugins this machine has. With it: "
        "what each member of the system has (name, code hash, usage, where it came from), "
        "members with the same list together. `satind plugins reload` makes every member "
        "rescan its --plugin-path directories (as SIGHUP to a daemon does) and says what "
        "changed; installed packages and built-ins need a restart.",
    )
    plist.add_argument(
        "action",
        nargs="?",
        choices=["list", "reload"],
        default="list",
        help="list (the default) or reload",
    )
    plist.add_argument(
        "--plugin-path",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="without --to: also load the plugin files in DIR (repeatable)",
    )
    plist.add_argument("--json", action="store_true", help="one JSON array on stdout")
    client_options(plist)

    add_start(sub, commands)

    submit = commands["submit"] = sub.add_parser(
        "submit",
        help="submit a run to a daemon; prints its run id",
        description="Submit PLUGIN ARGS to the peer at --to, which becomes the run's master.",
    )
    submit.add_argument("plugin", metavar="PLUGIN", help="plugin name (see `satind plugins`)")
    submit.add_argument("args", metavar="ARGS", nargs="*", help="the plugin's arguments")
    submit.add_argument(
        "--wait", action="store_true", help="wait for the result and print it as `satind run` does"
    )
    submit.add_argument("--json", action="store_true", help="JSON output")
    submit.add_argument(
        "--no-check",
        action="store_true",
        help="the master skips the plugin's independent result check",
    )
    submit.add_argument(
        "--weight",
        type=weight,
        default=1.0,
        metavar="W",
        help="the run's share of the peers beside other runs at once (default 1; more than "
        "0, at most 1000): thieves take a run of weight 2 twice as often as one of weight 1",
    )
    submit.add_argument(
        "--cancel-on-interrupt",
        action="store_true",
        help="with --wait: Ctrl-C cancels the run (by default the run goes on, and the "
        "command that cancels it is printed)",
    )
    submit.add_argument(
        "--trace",
        type=Path,
        metavar="FILE",
        help="with --wait: write the run's trace to FILE (as `satind run --trace`)",
    )
    submit.add_argument(
        "--ship",
        type=Path,
        metavar="DIR",
        help="send the plugin's code with the run: DIR's *.py files (the plugin imports its "
        "helpers as from --plugin-path: `import helper`), instead of what the peers "
        "have installed. The peers must accept shipped code ([plugins] accept_shipped) and "
        "the client certificate allow it (`keys issue --client --may-ship`)",
    )
    client_options(submit)

    result = commands["result"] = sub.add_parser("result", help="fetch a run's result")
    run_id_argument(result)
    result.add_argument("--wait", action="store_true", help="wait until the run ends")
    result.add_argument("--json", action="store_true", help="one JSON object on stdout")
    result.add_argument(
        "--outputs",
        type=Path,
        metavar="DIR",
        help="write the output files the result carries (a picture a report made) into DIR, "
        "each under its base name (`submit --wait` and `run` write them where they run)",
    )
    client_options(result)

    resume = commands["resume"] = sub.add_parser(
        "resume",
        help="resume a run from checkpoint logs (after every peer was lost, or elsewhere)",
        description="The peer at --to loads every log in its [checkpoint] dir, becomes the "
        "run's master under a new epoch and respawns the root; checkpointed results are "
        "reused (stats.results_reused) instead of computed.",
    )
    run_id_argument(resume)
    resume.add_argument("--wait", action="store_true", help="wait for the result")
    resume.add_argument("--json", action="store_true", help="JSON output, as `satind run --json`")
    client_options(resume)

    suspend = commands["suspend"] = sub.add_parser(
        "suspend",
        help="checkpoint and stop a run; `satind resume` continues it, here or elsewhere",
        description="The run's master stops it; every peer writes what it finished for it to "
        "its checkpoint log. Needs peers started with --checkpoint-dir.",
    )
    run_id_argument(suspend)
    client_options(suspend)

    cancel = commands["cancel"] = sub.add_parser(
        "cancel",
        help="stop a run everywhere, for good",
        description="The run's master (any peer relays the request) drops the run on every "
        "peer: queued, running and stolen jobs, custody, kept results. Nothing of it is "
        "restarted, kept or checkpointed; the submitter is told; `satind result` answers "
        "that it was cancelled. Works on queued runs too, with or without checkpoints.",
    )
    run_id_argument(cancel)
    client_options(cancel)

    logs = commands["logs"] = sub.add_parser(
        "logs",
        help="what a run's jobs printed or logged",
        description="Each peer captures what a plugin writes to stdout/stderr or through "
        "logging inside a job, with the run id, peer name and time (bounded: run.log_lines "
        "per run), and sends it to the run's master; any peer relays the request there. "
        "Each line reads 'TIME PEER: text', TIME in UTC to the millisecond "
        "(2026-11-26T10:01:02.345Z) by the clock of the peer that ran the job.",
    )
    run_id_argument(logs)
    logs.add_argument("--follow", action="store_true", help="print new lines until the run ends")
    logs.add_argument(
        "--timestamps",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="begin each line with when it was written (default: yes)",
    )
    client_options(logs)

    history = commands["runs"] = sub.add_parser(
        "runs",
        help="the runs of the run history (kept across restarts)",
        description="Runs newest first, from the run history every machine keeps in SQLite "
        "(the master's machine and the machines of the members that keep copies of its "
        "result; docs/operations.md, 'Run history'), with the runs going on now. `result` and "
        "`logs` answer for these runs after the daemons restarted.",
    )
    history.add_argument(
        "--all", action="store_true", help="every run kept ([history] keep_runs, keep_s)"
    )
    history.add_argument(
        "--limit", type=int, default=20, metavar="N", help="the newest N runs (default 20)"
    )
    history.add_argument(
        "--state",
        metavar="STATE[,STATE]",
        help="only runs in these states: done, failed, cancelled, suspended, running, queued",
    )
    history.add_argument(
        "--since", metavar="DURATION", help="only runs that ended in the last 90s, 30m, 1h, 2d, 1w"
    )
    history.add_argument("--json", action="store_true", help="a JSON list on stdout")
    client_options(history)

    status = commands["status"] = sub.add_parser(
        "status",
        help="peers and runs of the system",
        description="One line per peer (state alive/suspect/dead/left/draining) and per run.",
    )
    status.add_argument("--watch", action="store_true", help="a live view, until Ctrl-C")
    status.add_argument("--json", action="store_true", help="one JSON object on stdout")
    client_options(status)

    ready = commands["ready"] = sub.add_parser(
        "ready",
        help="exit 0 when this machine's peers are up and joined (a readiness probe)",
        description="Ask the peer at --to (this machine's first) for its own status and its "
        "view of the members. Exit 0 and say so when it joined the system (its seeds "
        "answered, or it is the first member), is up, no peer of its machine is suspect or "
        "dead, and the counts below are met; else exit 1 with what is missing. Any client "
        "certificate will do (no operate grant).",
    )
    ready.add_argument(
        "--peers",
        type=int,
        metavar="N",
        help="also wait for N peers of this machine to be up (its `satind start --peers`)",
    )
    ready.add_argument(
        "--members",
        type=int,
        default=1,
        metavar="N",
        help="also wait for N members of the system to be up, this machine's included (default 1)",
    )
    ready.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="not ready when no answer came within S seconds (default: [client] timeout_s)",
    )
    client_options(ready)

    drain = commands["drain"] = sub.add_parser(
        "drain",
        help="drain peers: stop taking work, finish it, leave",
    )
    drain.add_argument(
        "peer",
        metavar="PEER_ID",
        nargs="?",
        help="the peer to drain (NAME/INDEX), or every peer of a machine (NAME); or use --cluster",
    )
    drain.add_argument("--cluster", help="drain every peer of this cluster")
    deadline_option(drain)
    client_options(drain)

    for verb, what in (
        (
            "reclaim",
            "the machine's owner takes peers back: they suspend their work (kept, not lost) "
            "and take none until released; masters count them RECLAIMED meanwhile (an "
            "iterative run's scheduler learns how often each worker is reclaimed)",
        ),
        ("release", "give reclaimed peers back: their suspended work goes on where it was"),
    ):
        cmd = commands[verb] = sub.add_parser(verb, help=what.split(":")[0], description=what)
        cmd.add_argument("peers", metavar="PEER_ID", nargs="+", help="peers (NAME/INDEX)")
        client_options(cmd)

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
    deadline_option(stop)
    client_options(stop)

    keys = commands["keys"] = sub.add_parser(
        "keys",
        help="make a cluster CA and certificates",
        description=(
            "`satind keys init DIR [NAME]` makes a cluster CA and a client certificate "
            "'client' (and, with NAME, a node certificate for machine NAME); "
            "`satind keys issue DIR NAME` a node certificate for machine NAME; "
            "`--client` a client certificate. Keys are written 0600. A client certificate "
            "says what its holder may do (checked by every peer): submit runs and cancel or "
            "read its own (always); --may-operate: drain, reclaim, release and stop peers, "
            "reload plugins, cancel or read any run; --may-ship: submit runs with their code "
            "sent along. `keys init` makes 'client' with submit and operate."
        ),
    )
    keys.add_argument(
        "action",
        choices=["init", "issue", "trust", "untrust"],
        help="init: a new CA; issue: a certificate; trust/untrust FILE: trust another CA's "
        "certificates (a ca.pem) in DIR too, or no longer — to move a cluster to a new CA "
        "without stopping it (docs/deploy.md, 'Rotating the CA')",
    )
    keys.add_argument("directory", type=Path, metavar="DIR", help="the keys directory")
    keys.add_argument(
        "name",
        nargs="?",
        metavar="NAME",
        help="the certificate's (machine's) name; for trust/untrust, the other CA's ca.pem",
    )
    keys.add_argument("--client", action="store_true", help="issue a client certificate")
    keys.add_argument(
        "--may-operate",
        action="store_true",
        help="the client may also drain, reclaim, release and stop peers, reload plugins, "
        "and cancel or read any run",
    )
    keys.add_argument(
        "--may-ship",
        action="store_true",
        help="the client may also submit runs with their code sent along (the peers must "
        "accept shipped code too: [plugins] accept_shipped)",
    )

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
    sim.add_argument(
        "scenario",
        type=Path,
        metavar="SCENARIO.toml",
        help="a scenario file (see configs/scenarios/)",
    )
    sim.add_argument("--seed", type=int, help="override the scenario's seed")
    sim.add_argument("--json", action="store_true", help="print one JSON object")

    cfg = commands["config"] = sub.add_parser("config", help="show the effective configuration")
    cfg.add_argument("action", choices=["show"], help="show: print the effective configuration")
    cfg.add_argument("--config", type=Path, help="TOML config file")
    return parser, commands


def command_index(argv: Sequence[str], commands: dict[str, argparse.ArgumentParser]) -> int:
    """Position of the command word (the first argument naming a command), or the end."""
    for i, word in enumerate(argv):
        if word in commands:
            return i
    return len(argv)


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """``satind ARGV`` as the command reads it: the global options, then the command's own
    (those of ``run`` and ``submit`` intermixed, so that options may follow the plugin's
    arguments). ``command`` is None when ARGV names no command. Deployment recipes are checked
    against this (tests/configs/).

    Raises:
        SystemExit: a usage error, --help or --version (argparse printed what).
    """
    argv = list(argv)
    top_parser, commands = build()
    at = command_index(argv, commands)
    top = top_parser.parse_args(argv[:at])  # global options only (and --help)
    if at == len(argv):
        return argparse.Namespace(command=None, log_level=top.log_level)
    command = argv[at]
    sub = commands[command]
    if command in ("run", "submit"):
        args = sub.parse_intermixed_args(argv[at + 1 :])
    else:
        args = sub.parse_args(argv[at + 1 :])
    args.command = command
    args.log_level = top.log_level or ("INFO" if command == "start" else "WARNING")
    return args


def run_id_argument(command: argparse.ArgumentParser) -> None:
    """The RUN_ID of a command about one run."""
    command.add_argument(
        "run_id",
        metavar="RUN_ID",
        type=run_id,
        help="the run's id (printed by submit; see `satind status` or `satind runs`)",
    )
