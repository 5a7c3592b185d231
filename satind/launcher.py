"""Start N local peers as child processes: the embedded default behind ``satind run``.

Start-up is a small handshake over the children's pipes: each child binds 127.0.0.1 on port 0
and prints one JSON line with its name and port; when all have reported, the launcher writes
the full member list to each child's stdin, and each child answers with a second line once it
has installed the list (only then may a run be submitted: a master that does not yet know the
others would keep the run to itself). A child stops when its stdin reaches end of file,
so no peer outlives its launcher, even one killed with SIGKILL. Children run in their own
session: a Ctrl-C reaches only the launcher, which then stops them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio

from satind.config import Config, StealAlgorithm
from satind.membership.view import Member, StaticMembership
from satind.net.transport import Address

log = logging.getLogger(__name__)

CHILD_MODULE = "satind.launcher"


class StartupError(RuntimeError):
    """A local peer failed to start; the message carries what it printed."""


@dataclass
class LocalPeer:
    name: str
    cluster: str
    process: trio.Process
    address: Address | None = None


def cluster_label(index: int, peers: int, clusters: int) -> str:
    """Spread peers over clusters in contiguous blocks: c0 gets the first peers, and so on."""
    per = -(-peers // clusters)
    return f"c{index // per}"


async def _read_line(stream: trio.abc.ReceiveStream, limit: int = 65536) -> bytes:
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some(1)
        if not chunk:
            break
        data += chunk
        if len(data) > limit:
            raise StartupError("peer start-up line too long")
    return bytes(data)


@asynccontextmanager
async def local_peers(
    count: int,
    *,
    clusters: int = 1,
    steal: StealAlgorithm = "crs",
    plugin_paths: Sequence[Path] = (),
    config_file: Path | None = None,
    cfg: Config,
    log_level: str = "WARNING",
    seed: int | None = None,
) -> AsyncIterator[list[LocalPeer]]:
    """Start ``count`` peers, yield them once they all know each other, stop them all."""
    if count < 1:
        raise ValueError("--peers must be at least 1")
    if not 1 <= clusters <= count:
        raise ValueError(f"--clusters must be between 1 and the number of peers ({count})")
    peers: list[LocalPeer] = []
    try:
        for i in range(count):
            name = f"p{i}"
            cluster = cluster_label(i, count, clusters)
            cmd = [
                sys.executable,
                "-m",
                CHILD_MODULE,
                "--name",
                name,
                "--cluster",
                cluster,
                "--steal",
                steal,
                "--log-level",
                log_level,
            ]
            for path in plugin_paths:
                cmd += ["--plugin-path", str(path)]
            if config_file is not None:
                cmd += ["--config", str(config_file)]
            if seed is not None:
                cmd += ["--seed", str(seed * 1000 + i)]
            process = await trio.lowlevel.open_process(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
            )
            peers.append(LocalPeer(name, cluster, process))
        with trio.fail_after(cfg.launcher.start_timeout_s):
            for peer in peers:
                assert peer.process.stdout is not None
                line = await _read_line(peer.process.stdout)
                if not line:
                    code = await peer.process.wait()
                    raise StartupError(f"peer {peer.name} exited with code {code} during start-up")
                ready = json.loads(line)
                peer.address = Address(ready["host"], int(ready["port"]))
        roster = [
            {"name": p.name, "cluster": p.cluster, "host": p.address.host, "port": p.address.port}
            for p in peers
            if p.address is not None
        ]
        line = (json.dumps(roster) + "\n").encode()
        for peer in peers:
            assert peer.process.stdin is not None
            await peer.process.stdin.send_all(line)
        with trio.fail_after(cfg.launcher.start_timeout_s):
            for peer in peers:
                assert peer.process.stdout is not None
                if not await _read_line(peer.process.stdout):
                    raise StartupError(f"peer {peer.name} exited while joining")
        yield peers
    finally:
        with trio.CancelScope(shield=True):
            await _stop(peers, cfg.launcher.stop_grace_s)


async def _stop(peers: list[LocalPeer], grace: float) -> None:
    """Close every child's stdin (the stop signal), then kill what is still there."""
    for peer in peers:
        if peer.process.stdin is not None:
            with (
                trio.move_on_after(0.5),
                contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError),
            ):
                await peer.process.stdin.aclose()
    with trio.move_on_after(grace):
        for peer in peers:
            await peer.process.wait()
    for peer in peers:
        if peer.process.returncode is None:
            log.warning("peer %s (pid %d) did not stop; killing it", peer.name, peer.process.pid)
            peer.process.kill()
            await peer.process.wait()
        if peer.process.stdout is not None:
            await peer.process.stdout.aclose()


# -- the child side ----------------------------------------------------------------------------


async def _child(args: argparse.Namespace) -> None:
    from satind import config
    from satind.peer import Peer

    cfg = config.load(args.config)
    if args.steal:
        import dataclasses

        cfg = dataclasses.replace(cfg, steal=dataclasses.replace(cfg.steal, algorithm=args.steal))
    membership = StaticMembership(Member(args.name, Address("127.0.0.1", 0), args.cluster))
    peer = Peer(cfg, membership, plugin_paths=args.plugin_path, seed=args.seed)
    stdin = trio.lowlevel.FdStream(os.dup(sys.stdin.fileno()))
    async with trio.open_nursery() as nursery:
        address = await nursery.start(peer.run, Address("127.0.0.1", 0))
        membership.set_me(Member(args.name, address, args.cluster))
        sys.stdout.write(
            json.dumps({"name": args.name, "host": address.host, "port": address.port}) + "\n"
        )
        sys.stdout.flush()
        roster = json.loads(await _read_line(stdin, limit=16 * 1024 * 1024) or b"[]")
        membership.set_members(
            [Member(r["name"], Address(r["host"], int(r["port"])), r["cluster"]) for r in roster]
        )
        sys.stdout.write(json.dumps({"name": args.name, "members": len(roster)}) + "\n")
        sys.stdout.flush()

        async def watch_stdin() -> None:
            # End of file on stdin: the launcher is gone or asks us to stop.
            while await stdin.receive_some(4096):
                pass
            peer.stop()

        nursery.start_soon(watch_stdin)


def child_main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m satind.launcher")
    parser.add_argument("--name", required=True)
    parser.add_argument("--cluster", default="c0")
    parser.add_argument("--steal", choices=["rs", "crs"])
    parser.add_argument("--plugin-path", type=Path, action="append", default=[])
    parser.add_argument("--config", type=Path)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format=f"%(asctime)s {args.name} %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from satind.config import load

    sys.setswitchinterval(load(args.config).engine.switch_interval_s)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(KeyboardInterrupt):
        trio.run(_child, args)


if __name__ == "__main__":
    child_main()
