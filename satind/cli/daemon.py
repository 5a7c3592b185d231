"""`satind start`: run this machine's peers in the foreground (ops/daemon.py)."""

from __future__ import annotations

import argparse
from typing import Any

from satind._trio import run_flat
from satind.cli.common import flags_of, heuristic_flag, load_config
from satind.cli.exits import EXIT_USAGE, CliError
from satind.config import Config
from satind.net import tls
from satind.net.transport import parse_address
from satind.ops.advertise import parse_advertise


def start(args: argparse.Namespace) -> int:
    from satind.ops.daemon import DaemonError, Supervisor

    cfg = start_config(args)
    try:
        supervisor = Supervisor(cfg, args.log_level)
        return int(run_flat(supervisor.run))
    except (DaemonError, tls.KeysError) as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def start_config(args: argparse.Namespace) -> Config:
    """The daemon's configuration: the config file with `satind start`'s flags over it.

    Raises:
        CliError: a flag or the file is not valid (a usage error).
    """
    cfg = load_config(args.config)
    daemon: dict[str, Any] = {
        "cluster": args.cluster,
        "peers": args.peers,
        "keys": args.keys,
        "name": args.name,
        "standby": True if args.standby else None,
        "on_sigterm": args.on_sigterm,
        "drain_deadline_s": args.drain_deadline,
        "state_dir": str(args.state_dir.resolve()) if args.state_dir is not None else None,
    }
    try:
        if args.listen:
            address = parse_address(args.listen)
            daemon.update(host=address.host, port=address.port)
        if args.advertise:
            parse_advertise(args.advertise)
            daemon["advertise"] = args.advertise
        if args.seeds:
            daemon["seeds"] = [s for s in args.seeds.split(",") if s]
            for seed in daemon["seeds"]:
                parse_address(seed)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    if args.plugin_path:
        daemon["plugin_paths"] = [*cfg.daemon.plugin_paths, *map(str, args.plugin_path)]
    if args.peers is not None and args.peers < 1:
        raise CliError("--peers must be at least 1", EXIT_USAGE)
    if args.drain_deadline is not None and not args.drain_deadline >= 0:  # (NaN too)
        raise CliError("--drain-deadline must be 0 or more seconds", EXIT_USAGE)
    if args.checkpoint_interval is not None and args.checkpoint_interval <= 0:
        raise CliError("--checkpoint-interval must be a positive number of seconds", EXIT_USAGE)
    checkpoint = {
        "dir": str(args.checkpoint_dir.resolve()) if args.checkpoint_dir is not None else None,
        "interval_s": args.checkpoint_interval,
    }
    if args.metrics_port is not None and not 0 <= args.metrics_port < 65536:
        raise CliError("--metrics-port must be a port number (0: any free port)", EXIT_USAGE)
    metrics = {
        "enabled": True if args.metrics_port is not None else None,
        "port": args.metrics_port,
    }
    history = {
        "enabled": False if args.no_history else None,
        "path": str(args.history.resolve()) if args.history is not None else None,
    }
    if args.dashboard_port is not None and not 0 <= args.dashboard_port < 65536:
        raise CliError("--dashboard-port must be a port number (0: any free port)", EXIT_USAGE)
    dashboard = {
        "enabled": True if args.dashboard_port is not None else None,
        "port": args.dashboard_port,
    }
    flags = {
        "daemon": daemon,
        "dashboard": dashboard,
        "history": history,
        "checkpoint": checkpoint,
        "metrics": metrics,
        "iterative": {"heuristic": heuristic_flag(args)},
        "plugins": {"accept_shipped": True if args.accept_shipped else None},
    }
    return flags_of(cfg, flags)
