"""`satind start`'s arguments (the daemon's): apart from the other commands' (cli/parser.py),
for they are the most."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from satind import config as config_mod


def heuristic_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--heuristic",
        metavar="NAME",
        help="how masters place the tasks of iterative runs on workers: emct (default), "
        "emct*, mct, mct*, ud, ud*, lw, lw*, random, random1-4, random1w-4w "
        "(docs/volatile.md; config iterative.heuristic)",
    )


def add_start(sub: Any, commands: dict[str, argparse.ArgumentParser]) -> None:
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
    heuristic_option(start)
    start.add_argument("--listen", metavar="HOST:PORT", help="address of peer 0")
    start.add_argument(
        "--advertise",
        metavar="HOST[:PORT]",
        help="the address the other machines reach this one at, which the peers give the "
        "members (peer i: PORT + i when a port is given, else the port it listens on). "
        "Default: the --listen address, or, when listening on every interface (0.0.0.0), the "
        "address of the interface that reaches the seeds ([daemon] advertise)",
    )
    start.add_argument("--seeds", metavar="HOST:PORT,...", help="peers of other machines")
    start.add_argument(
        "--state-dir",
        type=Path,
        metavar="DIR",
        help="where the machine keeps what outlives its peers: the members they last saw "
        "alive, which a restarted peer rejoins through ([daemon] state_dir; default "
        "$XDG_STATE_HOME/satind, ~/.local/state/satind without XDG_STATE_HOME)",
    )
    start.add_argument("--cluster", help="this machine's cluster label")
    start.add_argument("--peers", type=int, help="number of peers (default: one per core)")
    start.add_argument("--keys", metavar="DIR", help="keys directory (see `satind keys`)")
    start.add_argument("--name", help="this machine's name (its certificate's; default: host)")
    start.add_argument(
        "--standby",
        action="store_true",
        help="join as standby peers: members that take no work until admitted, by the "
        "coordinator of a run ([adapt] enabled) when it wants more peers, or by `satind "
        "release NAME/0 ...` (docs/operations.md, self-adaptivity)",
    )
    start.add_argument(
        "--plugin-path",
        action="append",
        default=[],
        metavar="DIR",
        help="also load the plugin files in DIR: each *.py there that assigns PLUGIN at its "
        "top level (repeatable; docs/plugins.md)",
    )
    start.add_argument(
        "--accept-shipped",
        action="store_true",
        help="let clients whose certificate may ship (`satind keys issue ... --client "
        "--may-ship`) send a plugin's code with their run ([plugins] accept_shipped; off by "
        "default: it runs their code on these peers; docs/operations.md, shipped code)",
    )
    start.add_argument(
        "--on-sigterm",
        choices=["leave", "drain"],
        help="what SIGTERM (a service manager's stop) does: the peers leave at once, or drain "
        "first (finish their work, hand their results over, then leave). Default: [daemon] "
        f"on_sigterm ({config_mod.DEFAULT.daemon.on_sigterm})",
    )
    start.add_argument(
        "--drain-deadline",
        type=float,
        metavar="S",
        help="seconds a drain goes on before the peers leave at once (SIGTERM with "
        "--on-sigterm drain, and `drain`/`stop --drain` without --deadline); give a service "
        "manager's stop timeout more than this. Default: [daemon] drain_deadline_s "
        f"({config_mod.DEFAULT.daemon.drain_deadline_s:g})",
    )
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
    start.add_argument(
        "--history",
        type=Path,
        metavar="FILE",
        help="keep the run history in this SQLite file (`satind runs`; `result` and `logs` "
        "after a restart). Default: [history] path, else "
        "$XDG_STATE_HOME/satind/history-NAME.sqlite (~/.local/state without XDG_STATE_HOME)",
    )
    start.add_argument(
        "--no-history",
        action="store_true",
        help="keep no run history ([history] enabled = false)",
    )
    start.add_argument(
        "--dashboard-port",
        type=int,
        metavar="PORT",
        help="serve the web dashboard at http://HOST:PORT+i/ for peer i, HOST being "
        "[dashboard] host (127.0.0.1 unless configured; elsewhere it needs [dashboard] tls or "
        "token); 0: any free ports (the log says which). Default: off ([dashboard] enabled)",
    )
    start.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT+i/metrics for peer i, HOST being "
        "[metrics] host (127.0.0.1 unless configured); 0: any free ports (the log says "
        "which). Default: off ([metrics] enabled)",
    )
