"""Commands that need no running system: `run` (the embedded default), `plugins`, `config`,
`keys` and `simulate`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from satind import config as config_mod
from satind import files
from satind import plugin as plugins
from satind._trio import run_flat
from satind.cli.common import env_default, flags_of, heuristic_flag, load_config
from satind.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE, FOR_FAILURE, CliError
from satind.cli.report import print_report, run_report
from satind.net import tls, trust


def run(args: argparse.Namespace) -> int:
    from satind.cli.console import follow_run
    from satind.client.files import ClientFiles
    from satind.client.runner import Failure, LocalRun, run_local

    peers = args.peers if args.peers is not None else config_mod.default_peer_count()
    if peers < 1:
        raise CliError("--peers must be at least 1", EXIT_USAGE)
    if not 1 <= args.clusters <= peers:
        raise CliError(f"--clusters must be between 1 and --peers ({peers})", EXIT_USAGE)
    cfg = flags_of(
        load_config(args.config),
        {"steal": {"algorithm": args.steal}, "iterative": {"heuristic": heuristic_flag(args)}},
    )
    # The user's own files, read here (once) and sent to the peers; outputs written here.
    run_files = ClientFiles(args.args, cfg.files.max_input_bytes)
    found = load_plugins(args.plugin_path, cfg)
    plugin = resolve_plugin(args.plugin, args.args, found.plugins, run_files.local)
    request = LocalRun(
        plugin=plugin,
        argv=args.args,
        peers=peers,
        clusters=args.clusters,
        plugin_paths=args.plugin_path,
        log_level=args.log_level,
        seed=args.seed,
        progress=follow_run if not args.json and sys.stderr.isatty() else None,
        check=not args.no_check,
        trace=args.trace,
        files=run_files,
        vetted=found.verdicts,
    )
    try:
        outcome = run_flat(run_local, request, cfg)
    except KeyboardInterrupt:
        print("satind: interrupted; every peer was stopped", file=sys.stderr)
        return 130
    if isinstance(outcome, Failure):
        raise CliError(outcome.message, FOR_FAILURE[outcome.kind])
    report = run_report(plugin.name, args.args, outcome)
    # The peers ran here: on this many CPUs (four peers on two CPUs can look efficient, each
    # busy on its half of a CPU).
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    report.update(clusters=args.clusters, steal=cfg.steal.algorithm, cpus=cpus or 1)
    return print_report(report, args.json)


def load_plugins(paths: Sequence[Path], cfg: config_mod.Config) -> plugins.Discovery:
    """This machine's plugins; a line on stderr for each plugin module not loaded (its file
    and why: it failed, exited or hung at import)."""
    try:
        found = plugins.load(paths, cfg.plugins)
    except FileNotFoundError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    for failure in found.failures:
        print(f"satind: {failure}", file=sys.stderr)
    return found


def resolve_plugin(
    name: str,
    argv: list[str],
    available: dict[str, plugins.Plugin],
    local: files.Local | None = None,
) -> plugins.Plugin:
    """The plugin to run, with its arguments checked here, before any peer starts (its input
    files read through ``local``, which keeps them to send)."""
    plugin = available.get(name)
    if plugin is None:
        raise CliError(str(plugins.UnknownPlugin(name, available)), EXIT_USAGE)
    try:
        with files.scope(local or files.Local(config_mod.DEFAULT.files.max_input_bytes)):
            plugin.parse_args(argv)
    except plugins.UsageError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except plugins.PluginFailed as exc:
        raise CliError(str(exc), EXIT_FAILED) from None
    return plugin


def list_plugins(args: argparse.Namespace) -> int:
    """This machine's plugins; with --to (or $SATIND_TO) or `reload`, the system's."""
    if args.action == "reload" or env_default(args.to, "SATIND_TO", ""):
        from satind.cli.system import plugins as system_plugins

        cfg = load_config(args.config)
        return int(run_flat(system_plugins, args, cfg))
    found = load_plugins(args.plugin_path, load_config(args.config)).plugins
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "name": p.name,
                        "code_hash": p.code_hash,
                        "source": p.source,
                        "usage": p.usage,
                        "description": p.description,
                    }
                    for p in found.values()
                ]
            )
        )
        return EXIT_OK
    for name, plugin in sorted(found.items()):
        print(f"{name:12} {plugin.usage:40} {plugin.description}")
    return EXIT_OK


def config(args: argparse.Namespace) -> int:
    print(config_mod.to_toml(load_config(args.config)), end="")
    return EXIT_OK


def simulate(args: argparse.Namespace) -> int:
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
        for run in report.runs:
            took = "-" if run["makespan_s"] is None else f"{run['makespan_s']:.3f} s"
            print(
                f"  run {run['plugin']} mastered by {run['master']}: {took} virtual, check "
                f"{run['check'] or '-'}{' · ' + run['error'] if run['error'] else ''}"
            )
        for violation in report.violations:
            print(f"  violation: {violation}")
    return EXIT_OK if report.invariants_ok else EXIT_FAILED


def keys(args: argparse.Namespace) -> int:
    try:
        if args.action == "init":
            if args.client:
                raise CliError(
                    "satind keys init: --client is for `keys issue` (init always makes the "
                    "client certificate 'client')",
                    EXIT_USAGE,
                )
            ca = tls.init_ca(args.directory)
            # The operator's own client: everything but shipping code, which is asked for.
            operator = (tls.GRANT_SUBMIT, tls.GRANT_OPERATE)
            tls.issue(args.directory, "client", client=True, grants=operator)
            print(
                f"made a cluster CA ({ca}) and a client certificate 'client' (may submit and "
                f"operate) in {args.directory}"
            )
            if args.name:
                cert, _key = tls.issue(args.directory, args.name)
                print(f"issued node certificate {cert} for machine {args.name}")
                print(f"next: satind keys issue {args.directory} MACHINE  (for each other machine)")
            else:
                print(f"next: satind keys issue {args.directory} MACHINE  (once per machine)")
            return EXIT_OK
        if args.action in ("trust", "untrust"):
            if not args.name:
                raise CliError(
                    f"satind keys {args.action} DIR FILE: give the other CA's ca.pem", EXIT_USAGE
                )
            names = trust.change(args.directory, Path(args.name), args.action == "untrust")
            print(f"{args.directory / tls.CA_CERT} trusts: " + "; ".join(names))
            print("the daemons read it when they start: restart them one at a time (drain)")
            return EXIT_OK
        if not args.name:
            raise CliError("satind keys issue DIR NAME: give the certificate's NAME", EXIT_USAGE)
        if (args.may_operate or args.may_ship) and not args.client:
            raise CliError(
                "--may-operate and --may-ship are for client certificates (--client)", EXIT_USAGE
            )
        grants = [tls.GRANT_SUBMIT]
        grants += [tls.GRANT_OPERATE] if args.may_operate else []
        grants += [tls.GRANT_SHIP] if args.may_ship else []
        cert, key = tls.issue(args.directory, args.name, client=args.client, grants=grants)
        what = (
            f"client certificate (may {', '.join(grants)})" if args.client else "node certificate"
        )
        print(f"issued {what} {cert} (key {key})")
        return EXIT_OK
    except tls.KeysError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
