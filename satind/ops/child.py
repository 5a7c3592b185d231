"""A peer process: the child side of ``launcher.py``.

``python -m satind.ops.child --name NAME --control-fd C --report-fd R ...`` reads its
effective configuration, its credentials and its launcher's plugin verdicts from the first
line on the control pipe C (``PeerSpec.handover``), loads its plugins, binds, reports one JSON
line with its address on the report pipe R, joins through its seeds (from its flags, or a
second line on the control pipe), and reports a second line once it sees the members it was
told to expect. It leaves and exits when the control pipe reaches end of file — so no peer
outlives its launcher, even one killed with SIGKILL — or on SIGTERM (leave, or drain first:
``daemon.on_sigterm``). A peer that cannot run as configured exits 2 and says why on stderr
and on the report pipe (the daemon stops instead of restarting it forever); 3 when its port
is in use (which a daemon's restart waits out).

Plugin code runs in this process: it may print, and write to file descriptors 0 to 2, but
none of them is a channel to the launcher (stdin is /dev/null, stdout the launcher's
stderr), and the two pipes are not inherited by processes it starts.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import trio

import satind.plugin as plugin_mod
from satind._trio import run_flat
from satind.config import Config
from satind.engine.worker import tune_process
from satind.net import tls
from satind.net.transport import parse_address
from satind.ops.launcher import EXIT_PORT_BUSY, EXIT_USAGE, read_line

log = logging.getLogger(__name__)

EXIT_STOPPED = 0  # the child was asked to stop (stop, drain, end of the control pipe)


async def _child(
    args: argparse.Namespace,
    cfg: Config,
    credentials: tls.Credentials | None,
    found: dict[str, plugin_mod.Plugin],
) -> int:
    from satind.node.logs import capture
    from satind.node.peer import Peer, PeerOptions
    from satind.node.plugins import reload as reload_plugins

    options = PeerOptions(
        name=args.name,
        cluster=args.cluster,
        listen=parse_address(args.listen),
        advertise=parse_address(args.advertise) if args.advertise else None,
        state_dir=Path(args.state_dir) if args.state_dir else None,
        seeds=[parse_address(s) for s in args.seeds.split(",") if s],
        credentials=credentials,
        plugin_paths=args.plugin_path,
        seed=args.seed,
        standby=args.standby,
        plugins=found,
    )
    peer = Peer(cfg, options)
    capture(peer.logs)  # what plugins print inside jobs goes to their runs (satind logs)
    control = trio.lowlevel.FdStream(os.dup(args.control_fd))
    asked_to_stop = False
    # Open before the address is reported, so that no owner signal the daemon sends once
    # the peer is up is lost (they wait here until ``watch_owner`` reads them).
    with trio.open_signal_receiver(signal.SIGUSR1, signal.SIGUSR2) as owner_signals:
        async with trio.open_nursery() as nursery:
            address = await nursery.start(peer.run, not args.seeds_later)
            bound = {"name": args.name, "host": address.host, "port": address.port}
            if peer.metrics is not None and peer.metrics.address is not None:
                bound["metrics"] = f"http://{peer.metrics.address}/metrics"
            _say(args.report_fd, bound)
            if args.seeds_later:
                line = json.loads(await read_line(control) or b"{}")
                peer.join([parse_address(s) for s in line.get("seeds", [])])

            async def report_joined() -> None:
                await peer.joined.wait()
                await peer.wait_for_members(args.expect)
                _say(args.report_fd, {"name": args.name, "members": len(peer.table.alive())})

            async def watch_control() -> None:
                nonlocal asked_to_stop
                # End of file on the control pipe: the launcher is gone or asks us to stop.
                while await control.receive_some(4096):
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
                            peer.drain("SIGTERM", peer.machine(), cfg.daemon.drain_deadline_s)
                        else:
                            peer.leave()

            async def watch_owner() -> None:
                # The daemon's owner watch ([owner] reclaim, ops/owner.py): SIGUSR1 when the
                # machine's owner is at work, SIGUSR2 when they are gone.
                async for signum in owner_signals:
                    peer.owner_load(signum == signal.SIGUSR1)

            nursery.start_soon(report_joined)
            nursery.start_soon(watch_control)
            nursery.start_soon(watch_signals)
            nursery.start_soon(watch_owner)
            await peer.stopped.wait()
            nursery.cancel_scope.cancel()
    return EXIT_STOPPED


def _say(fd: int, obj: object) -> None:
    """One report to the launcher (the report pipe stays blocking: trio never touches it)."""
    data = (json.dumps(obj) + "\n").encode()
    while data:
        data = data[os.write(fd, data) :]


Handover = tuple[Config, tls.Credentials | None, dict[str, plugin_mod.Verdict]]


def _read_handover(fd: int) -> Handover:
    """The first line on the control pipe (PeerSpec.handover), read unbuffered: what follows
    (seeds, then end of file as the stop signal) is read by the peer later.

    Raises:
        ConfigError: no valid handover.
    """
    from satind.config import DEFAULT, ConfigError, with_overrides

    line = bytearray()
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            raise ConfigError(
                "no configuration from the launcher (start peers with satind run/start)"
            )
        line += byte
        if len(line) > 1 << 24:
            raise ConfigError("configuration line from the launcher too long")
    try:
        data = json.loads(line)
        cfg = with_overrides(DEFAULT, data["config"])
        creds = data["credentials"]
        vetted = {
            str(key): plugin_mod.Verdict(str(fingerprint), str(error))
            for key, (fingerprint, error) in data.get("vetted", {}).items()
        }
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"bad configuration from the launcher: {exc}") from None
    return cfg, None if creds is None else tls.Credentials.from_json(creds), vetted


def _load_plugins(
    paths: Sequence[Path], cfg: Config, vetted: dict[str, plugin_mod.Verdict]
) -> dict[str, plugin_mod.Plugin]:
    """This peer's plugins: what its launcher vetted is imported at once, anything else
    (code changed since) is vetted here first. The launcher named the modules it did not
    load already; what this peer found on its own is a warning here."""
    found = plugin_mod.load(paths, cfg.plugins, vetted)
    own = any(vetted.get(key) != verdict for key, verdict in found.verdicts.items())
    for failure in found.failures:
        log.log(logging.WARNING if own else logging.INFO, "%s", failure)
    return found.plugins


def child_main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m satind.ops.child")
    parser.add_argument("--name", required=True)
    parser.add_argument("--cluster", default="c0")
    parser.add_argument("--listen", default="127.0.0.1:0")
    parser.add_argument("--advertise", default="", help="HOST:PORT the members are given")
    parser.add_argument("--seeds", default="")
    parser.add_argument("--state-dir", default="", help="the machine's state directory")
    parser.add_argument("--seeds-later", action="store_true")
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--report-fd", type=int, required=True)
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
    # The daemon's owner signals (ops/owner.py) must never kill a peer that has not opened
    # their receiver yet (their default action is to terminate).
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    # Neither pipe goes to the processes this one starts (plugins' among them): the launcher
    # must see the report pipe end when this process ends.
    for fd in (args.control_fd, args.report_fd):
        os.set_inheritable(fd, False)
    code = 1
    try:
        cfg, credentials, vetted = _read_handover(args.control_fd)
        tune_process(cfg.engine)
        found = _load_plugins(args.plugin_path, cfg, vetted)
        code = run_flat(_child, args, cfg, credentials, found)
    except (tls.KeysError, ConfigError) as exc:
        code = _usage_error(args, str(exc))
    except FileNotFoundError as exc:  # a plugin path that is not a directory
        code = _usage_error(args, str(exc))
    except OSError as exc:
        code = _usage_error(args, f"cannot listen on {args.listen}: {exc}")
        if exc.errno == errno.EADDRINUSE:
            code = EXIT_PORT_BUSY  # a daemon's restart waits for it (launcher.py)
    sys.exit(code)


def _usage_error(args: argparse.Namespace, message: str) -> int:
    """A peer that cannot run as configured: say why on stderr, and on the report pipe for
    the launcher (a daemon stops instead of restarting it forever)."""
    print(f"satind peer {args.name}: {message}", file=sys.stderr)
    with contextlib.suppress(OSError):
        _say(args.report_fd, {"name": args.name, "error": message})
    return EXIT_USAGE


if __name__ == "__main__":
    child_main()
