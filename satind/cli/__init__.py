"""The ``satind`` command: parse (``parser.py``), run one command (``local.py``, ``daemon.py``,
``runs.py``, ``system.py``), print (``report.py``, ``console.py``), exit (``exits.py``)."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from satind import plugin as plugins
from satind.cli import parser
from satind.cli.exits import EXIT_FAILED, EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, CliError
from satind.client.errors import NotAllowed, PeerUnavailable, RequestFailed

# Commands that need no running system, and commands that talk to one (async, with the
# configuration of --config): "module:function" in satind.cli, imported when the command
# runs, so that `satind keys` does not load the client, nor `satind status` the launcher
# (each of the command's modules costs its start up to a third of a second).
LOCAL = {
    "run": "local:run",
    "plugins": "local:list_plugins",
    "config": "local:config",
    "simulate": "local:simulate",
    "keys": "local:keys",
    "start": "daemon:start",
}
CLIENT = {
    "submit": "runs:submit",
    "result": "runs:result",
    "resume": "runs:resume",
    "suspend": "runs:suspend",
    "cancel": "runs:cancel",
    "logs": "runs:logs",
    "status": "system:status",
    "runs": "history:runs",
    "ready": "ready:ready",
    "drain": "system:drain",
    "reclaim": "system:reclaim",
    "release": "system:reclaim",
    "stop": "system:stop",
}


def _command(spec: str) -> Any:
    module, name = spec.split(":")
    return getattr(importlib.import_module(f"satind.cli.{module}"), name)


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
    try:
        args = parser.parse(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if exc.code in (0, None) else EXIT_USAGE
    if args.command is None:
        parser.build()[0].print_help(sys.stderr)
        return EXIT_USAGE
    command = args.command
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        if command in LOCAL:
            local: Callable[[argparse.Namespace], int] = _command(LOCAL[command])
            return local(args)
        from satind._trio import run_flat
        from satind.cli.common import load_config

        client: Callable[..., Awaitable[int]] = _command(CLIENT[command])
        return int(run_flat(client, args, load_config(args.config)))
    except CliError as exc:
        print(f"satind: {exc}", file=sys.stderr)
        return exc.code
    except (PeerUnavailable, RequestFailed) as exc:
        print(f"satind: {exc}", file=sys.stderr)
        return EXIT_RUNTIME
    except NotAllowed as exc:  # the client certificate's grants (node/permissions.py)
        print(f"satind: not allowed: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except plugins.PluginFailed as exc:
        print(f"satind: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("satind: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    main()
