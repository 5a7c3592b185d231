"""A peer process: the child side of ``launcher.py``.

``python -m satind.ops.child --name NAME ...`` reads its effective configuration and its
credentials from the first line on stdin (``PeerSpec.handover``), binds, prints one JSON line
with its address, joins through its seeds (from its flags, or a second line on stdin), and
prints a second line once it sees the members it was told to expect. It leaves and exits when
its stdin reaches end of file — so no peer outlives its launcher, even one killed with
SIGKILL — or on SIGTERM (leave, or drain first: ``daemon.on_sigterm``). A peer that cannot
run as configured exits 2 and says why on stdout too (the daemon stops instead of restarting
it forever).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import trio

from satind._trio import run_flat
from satind.config import Config
from satind.engine.worker import tune_process
from satind.net import tls
from satind.net.transport import parse_address
from satind.ops.launcher import EXIT_USAGE, read_line

EXIT_STOPPED = 0  # the child was asked to stop (stop, drain, end of stdin)


async def _child(args: argparse.Namespace, cfg: Config, credentials: tls.Credentials | None) -> int:
    from satind.node.logs import capture
    from satind.node.peer import Peer, PeerOptions
    from satind.node.plugins import reload as reload_plugins

    options = PeerOptions(
        name=args.name,
        cluster=args.cluster,
        listen=parse_address(args.listen),
        seeds=[parse_address(s) for s in args.seeds.split(",") if s],
        credentials=credentials,
        plugin_paths=args.plugin_path,
        seed=args.seed,
        standby=args.standby,
    )
    peer = Peer(cfg, options)
    capture(peer.logs)  # what plugins print inside jobs goes to their runs (satind logs)
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    asked_to_stop = False
    async with trio.open_nursery() as nursery:
        address = await nursery.start(peer.run, not args.seeds_from_stdin)
        bound = {"name": args.name, "host": address.host, "port": address.port}
        if peer.metrics is not None and peer.metrics.address is not None:
            bound["metrics"] = f"http://{peer.metrics.address}/metrics"
        _say(bound)
        if args.seeds_from_stdin:
            line = json.loads(await read_line(stdin) or b"{}")
            peer.join([parse_address(s) for s in line.get("seeds", [])])

        async def report_joined() -> None:
            await peer.joined.wait()
            await peer.wait_for_members(args.expect)
            _say({"name": args.name, "members": len(peer.table.alive())})

        async def watch_stdin() -> None:
            nonlocal asked_to_stop
            # End of file on stdin: the launcher is gone or asks us to stop.
            while await stdin.receive_some(4096):
                pass
            asked_to_stop = True
            peer.leave()

        async def watch_signals() -> None:
            nonlocal asked_to_stop
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                async for signum in signals:
                    if signum == signal.SIGHUP:
                        nursery.start_soon(reload_plugins, peer)
                        continue
                    asked_to_stop = True
                    if cfg.daemon.on_sigterm == "drain":
                        # The daemon stops all its peers this way: none inherits a run.
                        peer.drain("SIGTERM", peer.machine())
                    else:
                        peer.leave()

        nursery.start_soon(report_joined)
        nursery.start_soon(watch_stdin)
        nursery.start_soon(watch_signals)
        await peer.stopped.wait()
        nursery.cancel_scope.cancel()
    return EXIT_STOPPED


def _say(obj: object) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _read_handover() -> tuple[Config, tls.Credentials | None]:
    """The first line on stdin (PeerSpec.handover), read unbuffered: what follows on stdin
    (seeds, then end of file as the stop signal) is read by the peer later.

    Raises:
        ConfigError: no valid handover.
    """
    from satind.config import DEFAULT, ConfigError, with_overrides

    line = bytearray()
    while not line.endswith(b"\n"):
        byte = os.read(0, 1)
        if not byte:
            raise ConfigError("no configuration on stdin (start peers with satind run/start)")
        line += byte
        if len(line) > 1 << 20:
            raise ConfigError("configuration line on stdin too long")
    try:
        data = json.loads(line)
        cfg = with_overrides(DEFAULT, data["config"])
        creds = data["credentials"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"bad configuration on stdin: {exc}") from None
    return cfg, None if creds is None else tls.Credentials.from_json(creds)


def child_main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m satind.ops.child")
    parser.add_argument("--name", required=True)
    parser.add_argument("--cluster", default="c0")
    parser.add_argument("--listen", default="127.0.0.1:0")
    parser.add_argument("--seeds", default="")
    parser.add_argument("--seeds-from-stdin", action="store_true")
    parser.add_argument("--expect", type=int, default=1)
    parser.add_argument("--plugin-path", type=Path, action="append", default=[])
    parser.add_argument("--seed", type=int)
    parser.add_argument("--standby", action="store_true")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format=f"%(asctime)s {args.name} %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from satind.config import ConfigError

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    code = 1
    try:
        cfg, credentials = _read_handover()
        tune_process(cfg.engine)
        code = run_flat(_child, args, cfg, credentials)
    except (tls.KeysError, ConfigError) as exc:
        code = _usage_error(args.name, str(exc))
    except OSError as exc:
        code = _usage_error(args.name, f"cannot listen on {args.listen}: {exc}")
    sys.exit(code)


def _usage_error(name: str, message: str) -> int:
    """A peer that cannot run as configured: say why on stderr, and on stdout for the
    launcher (a daemon stops instead of restarting it forever)."""
    print(f"satind peer {name}: {message}", file=sys.stderr)
    with contextlib.suppress(OSError):
        _say({"name": name, "error": message})
    return EXIT_USAGE


if __name__ == "__main__":
    child_main()
