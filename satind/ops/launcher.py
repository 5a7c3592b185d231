"""Peer processes on this machine: started, watched and stopped.

Both ``satind run`` (the embedded default: N local peers for one run) and ``satind start``
(the daemon) start peers as child processes of this module. A child binds its address and
prints one JSON line with its name and port; it joins the system through its seeds (gossip
does the rest) and prints a second line once it sees the number of members it was told to
expect. ``satind run`` starts all its children at once and, once they are bound, hands them
their seeds on stdin (``--seeds-from-stdin``), so start-up costs one interpreter start, not
one per peer. It leaves gracefully and exits when its stdin reaches end of file, so no peer outlives
its launcher, even one killed with SIGKILL. Children run in their own session: a Ctrl-C
reaches only the launcher, which then stops them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import trio

from satind.config import Config, LauncherConfig, for_peer
from satind.net import tls
from satind.net.transport import Address

log = logging.getLogger(__name__)

CHILD_MODULE = "satind.ops.child"
# A child that cannot run as configured (bad credentials or configuration, cannot listen)
# exits with this: a daemon must not restart it (child.py).
EXIT_USAGE = 2


class StartupError(RuntimeError):
    """A peer failed to start; the message says which and how."""


class PeerUsageError(StartupError):
    """A peer cannot run as configured (credentials, configuration, its address): starting
    it again would fail again."""


@dataclass
class PeerSpec:
    """How to start one peer process. The effective configuration and the credentials are
    handed to it over its stdin (``handover``), never through files or flags: the child runs
    with exactly the settings its launcher computed, and its key never touches a disk."""

    name: str
    cluster: str
    listen: Address
    cfg: Config
    credentials: tls.Credentials | None
    seeds: list[Address] = field(default_factory=list)
    seeds_from_stdin: bool = False
    expect: int = 1
    plugin_paths: Sequence[Path] = ()
    seed: int | None = None
    log_level: str = "WARNING"
    standby: bool = False

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            # -P: the current directory is not put on sys.path, so a peer started from a
            # checkout (or any directory with a satind/ in it) runs the satind the client runs.
            "-P",
            "-m",
            CHILD_MODULE,
            "--name",
            self.name,
            "--cluster",
            self.cluster,
            "--listen",
            f"{self.listen.host}:{self.listen.port}",
            "--expect",
            str(self.expect),
            "--log-level",
            self.log_level,
        ]
        if self.seeds:
            cmd += ["--seeds", ",".join(f"{a.host}:{a.port}" for a in self.seeds)]
        if self.seeds_from_stdin:
            cmd += ["--seeds-from-stdin"]
        for path in self.plugin_paths:
            cmd += ["--plugin-path", str(path)]
        if self.seed is not None:
            cmd += ["--seed", str(self.seed)]
        if self.standby:
            cmd += ["--standby"]
        return cmd

    def handover(self) -> bytes:
        """The first line on the child's stdin: its configuration and credentials."""
        data = {
            "config": dataclasses.asdict(self.cfg),
            "credentials": None if self.credentials is None else self.credentials.as_json(),
        }
        return (json.dumps(data) + "\n").encode()


@dataclass
class PeerProcess:
    spec: PeerSpec
    process: trio.Process
    address: Address | None = None
    # The peer's metrics endpoint (URL), when [metrics] is enabled.
    metrics: str = ""

    @property
    def name(self) -> str:
        return self.spec.name


async def read_line(stream: trio.abc.ReceiveStream, limit: int = 65536) -> bytes:
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some(1)
        if not chunk:
            break
        data += chunk
        if len(data) > limit:
            raise StartupError("peer start-up line too long")
    return bytes(data)


async def start_peer(spec: PeerSpec) -> PeerProcess:
    """Start one peer process and hand it its configuration and credentials (it reports its
    address later: see ``wait_bound``)."""
    process = await trio.lowlevel.open_process(
        spec.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )
    assert process.stdin is not None
    # If it died at once, wait_bound reports how.
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await process.stdin.send_all(spec.handover())
    return PeerProcess(spec, process)


async def wait_bound(peer: PeerProcess) -> Address:
    assert peer.process.stdout is not None
    line = await read_line(peer.process.stdout)
    if not line:
        code = await peer.process.wait()
        raise StartupError(f"peer {peer.name} exited with code {code} during start-up")
    ready = json.loads(line)
    if "error" in ready:
        await peer.process.wait()
        raise PeerUsageError(f"peer {peer.name}: {ready['error']}")
    peer.address = Address(ready["host"], int(ready["port"]))
    peer.metrics = str(ready.get("metrics", ""))
    return peer.address


async def wait_joined(peer: PeerProcess) -> None:
    assert peer.process.stdout is not None
    if not await read_line(peer.process.stdout):
        code = await peer.process.wait()
        raise StartupError(f"peer {peer.name} exited with code {code} while joining")


async def stop_peers(peers: Sequence[PeerProcess], cfg: LauncherConfig) -> None:
    """Close every child's stdin (the stop signal), then kill what is still there after
    ``cfg.stop_grace_s``."""
    grace = cfg.stop_grace_s
    for peer in peers:
        if peer.process.stdin is not None:
            with (
                trio.move_on_after(cfg.stdin_close_s),
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


def cluster_label(index: int, peers: int, clusters: int) -> str:
    """Spread peers over clusters in contiguous blocks: c0 gets the first peers, and so on."""
    per = -(-peers // clusters)
    return f"c{index // per}"


LOCAL_NODE = "local"
LOCAL_CLIENT = "client"


def ephemeral_keys() -> tls.EphemeralKeys:
    """A throw-away cluster CA in memory with a node certificate "local" and a client
    certificate "client": `satind run` is mutual TLS too, and leaves no key anywhere."""
    return tls.EphemeralKeys.make(LOCAL_NODE, LOCAL_CLIENT)


@asynccontextmanager
async def local_peers(
    count: int,
    *,
    keys: tls.EphemeralKeys,
    clusters: int = 1,
    plugin_paths: Sequence[Path] = (),
    cfg: Config,
    log_level: str = "WARNING",
    seed: int | None = None,
) -> AsyncIterator[list[PeerProcess]]:
    """Start ``count`` peers on 127.0.0.1; yield them once every one sees all the others;
    stop them all on the way out."""
    if count < 1:
        raise ValueError("--peers must be at least 1")
    if not 1 <= clusters <= count:
        raise ValueError(f"--clusters must be between 1 and the number of peers ({count})")
    peers: list[PeerProcess] = []

    def spec(i: int) -> PeerSpec:
        return PeerSpec(
            name=f"{LOCAL_NODE}/{i}",
            cluster=cluster_label(i, count, clusters),
            listen=Address("127.0.0.1", 0),
            cfg=for_peer(cfg, i),
            credentials=keys.node if cfg.net.tls else None,
            seeds_from_stdin=True,
            expect=count,
            plugin_paths=plugin_paths,
            seed=None if seed is None else seed * 1000 + i,
            log_level=log_level,
        )

    try:
        with trio.fail_after(cfg.launcher.start_timeout_s):
            for i in range(count):
                peers.append(await start_peer(spec(i)))
            for peer in peers:
                await wait_bound(peer)
            # Everyone joins through the first peer; it starts the system alone.
            first = peers[0].address
            assert first is not None
            for i, peer in enumerate(peers):
                seeds = [] if i == 0 else [f"{first.host}:{first.port}"]
                assert peer.process.stdin is not None
                await peer.process.stdin.send_all((json.dumps({"seeds": seeds}) + "\n").encode())
            for peer in peers:
                await wait_joined(peer)
        yield peers
    except trio.TooSlowError:
        raise StartupError(
            f"peers did not all start and join within {cfg.launcher.start_timeout_s} s"
        ) from None
    finally:
        with trio.CancelScope(shield=True):
            await stop_peers(peers, cfg.launcher)
