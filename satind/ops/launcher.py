"""Peer processes on this machine: started, watched and stopped.

Both ``satind run`` (the embedded default: N local peers for one run) and ``satind start``
(the daemon) start peers as child processes of this module. A launcher and a peer talk over
two pipes of their own, never over the peer's stdin and stdout: plugin code runs in the
peer, and what it reads or writes there must not be taken for satind's messages. On the
*control* pipe the launcher hands the peer its configuration and credentials (the first
line), and its seeds (``--seeds-later``); on the *report* pipe the peer says, one JSON line
each, that it is bound (name and port), that it sees the number of members it was told to
expect, or why it cannot run. A peer's stdin is /dev/null and its stdout is the launcher's
stderr, beside its own stderr (what a plugin prints outside jobs ends up there).

``satind run`` starts all its children at once and, once they are bound, hands them their
seeds, so start-up costs one interpreter start, not one per peer. A peer leaves gracefully
and exits when its control pipe reaches end of file, so no peer outlives its launcher, even
one killed with SIGKILL. Children run in their own session: a Ctrl-C reaches only the
launcher, which then stops them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
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
from satind.ops.forker import ForkedProcess, Forker, open_forker
from satind.plugin import Verdict

log = logging.getLogger(__name__)

CHILD_MODULE = "satind.ops.child"
# What a peer imports, for the template peers are forked from (ops/forker.py): the child's
# module and what it imports once it runs.
PEER_MODULES = (CHILD_MODULE, "satind.node.logs", "satind.node.peer", "satind.node.plugins")
# A child that cannot run as configured (bad credentials or configuration, cannot listen)
# exits with this: a daemon must not restart it (child.py).
EXIT_USAGE = 2
# A child whose port is in use exits with this instead (and says so as a usage error): at a
# daemon's first start that is a misconfiguration, at a restart a port the old instance's
# leftovers still hold, which a daemon waits out (ops/daemon.py).
EXIT_PORT_BUSY = 3


class StartupError(RuntimeError):
    """A peer failed to start; the message says which and how."""


class PeerUsageError(StartupError):
    """A peer cannot run as configured (credentials, configuration, its address): starting
    it again would fail again."""


@dataclass
class PeerSpec:
    """How to start one peer process. The effective configuration and the credentials are
    handed to it over its control pipe (``handover``), never through files or flags: the
    child runs with exactly the settings its launcher computed, and its key never touches a
    disk. So are the verdicts on the plugin modules its launcher vetted (plugin.Verdict): the
    peer imports those that came through without vetting the same code again."""

    name: str
    cluster: str
    listen: Address
    cfg: Config
    credentials: tls.Credentials | None
    seeds: list[Address] = field(default_factory=list)
    # The address the members are given (port 0: the bound one); None: the bound address.
    advertise: Address | None = None
    # The machine's state directory (node/remember.py); None: the peer remembers nothing.
    state_dir: Path | None = None
    # The seeds come later, on the control pipe (``satind run``: once every peer is bound).
    seeds_later: bool = False
    expect: int = 1
    plugin_paths: Sequence[Path] = ()
    seed: int | None = None
    log_level: str = "WARNING"
    standby: bool = False
    vetted: dict[str, Verdict] = field(default_factory=dict)

    def command(self, control_fd: int, report_fd: int) -> list[str]:
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
            "--control-fd",
            str(control_fd),
            "--report-fd",
            str(report_fd),
        ]
        if self.state_dir is not None:
            cmd += ["--state-dir", str(self.state_dir)]
        if self.advertise is not None:
            cmd += ["--advertise", f"{self.advertise.host}:{self.advertise.port}"]
        if self.seeds:
            cmd += ["--seeds", ",".join(f"{a.host}:{a.port}" for a in self.seeds)]
        if self.seeds_later:
            cmd += ["--seeds-later"]
        for path in self.plugin_paths:
            cmd += ["--plugin-path", str(path)]
        if self.seed is not None:
            cmd += ["--seed", str(self.seed)]
        if self.standby:
            cmd += ["--standby"]
        return cmd

    def handover(self) -> bytes:
        """The first line on the child's control pipe: its configuration, credentials and
        the plugin verdicts."""
        data = {
            "config": dataclasses.asdict(self.cfg),
            "credentials": None if self.credentials is None else self.credentials.as_json(),
            "vetted": {k: [v.fingerprint, v.error] for k, v in self.vetted.items()},
        }
        return (json.dumps(data) + "\n").encode()


@dataclass
class PeerProcess:
    spec: PeerSpec
    process: trio.Process | ForkedProcess
    # To the peer: the handover, then its seeds; closing it asks the peer to stop.
    control: trio.lowlevel.FdStream
    # From the peer: its reports, one JSON line each.
    reports: trio.lowlevel.FdStream
    address: Address | None = None
    # The peer's metrics endpoint (URL), when [metrics] is enabled.
    metrics: str = ""

    @property
    def name(self) -> str:
        return self.spec.name

    async def ask_to_stop(self, within_s: float) -> None:
        """Close the control pipe: the peer leaves and exits (giving up after ``within_s``)."""
        with (
            trio.move_on_after(within_s),
            contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError),
        ):
            await self.control.aclose()

    async def aclose(self) -> None:
        """Close both pipes (the process is gone)."""
        for stream in (self.control, self.reports):
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await stream.aclose()

    async def report(self, what: str) -> dict[str, object]:
        """The peer's next report, or {} when the pipe ended (the peer is gone).

        Raises:
            StartupError: the line is not a report (a JSON object).
        """
        line = await read_line(self.reports)
        if not line:
            return {}
        try:
            said = json.loads(line)
        except ValueError:
            said = None
        if not isinstance(said, dict):
            raise StartupError(
                f"peer {self.name} (pid {self.process.pid}) wrote {line[:200]!r} on its "
                f"report pipe {what}, which is not a report"
            )
        return said


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


def stdout_for_peers() -> int:
    """Where a peer's stdout goes: the launcher's stderr (/dev/null if it has none)."""
    try:
        os.fstat(2)
    except OSError:
        return subprocess.DEVNULL
    return 2


async def start_peer(spec: PeerSpec, forker: Forker | None = None) -> PeerProcess:
    """Start one peer process — forked from ``forker``'s template when there is one that
    works, else a new interpreter — and hand it its configuration and credentials (it
    reports its address later: see ``wait_bound``)."""
    control_read, control_write = os.pipe()
    report_read, report_write = os.pipe()
    command = spec.command(control_read, report_write)
    process: trio.Process | ForkedProcess | None = None
    try:
        if forker is not None and not forker.failed:
            try:
                process = await forker.spawn(command, (control_read, report_write))
            except OSError as exc:
                log.warning("%s; peers are started as new interpreters from now on", exc)
        if process is None:
            process = await trio.lowlevel.open_process(
                command,
                stdin=subprocess.DEVNULL,
                stdout=stdout_for_peers(),
                pass_fds=(control_read, report_write),
                start_new_session=True,
            )
    except BaseException:
        os.close(control_write)
        os.close(report_read)
        raise
    finally:
        # The child's ends: held only by the child now, so that its death ends the report
        # pipe, and the launcher's closing (or death) ends the control pipe.
        os.close(control_read)
        os.close(report_write)
    peer = PeerProcess(
        spec, process, trio.lowlevel.FdStream(control_write), trio.lowlevel.FdStream(report_read)
    )
    # If it died at once, wait_bound reports how.
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await peer.control.send_all(spec.handover())
    return peer


async def wait_bound(peer: PeerProcess) -> Address:
    """The address the peer reports once it is bound.

    Raises:
        PeerUsageError: the peer cannot run as configured (it says why).
        StartupError: it exited, or wrote something that is not its address.
    """
    ready = await peer.report("instead of its address")
    if not ready:
        code = await peer.process.wait()
        raise StartupError(f"peer {peer.name} exited with code {code} during start-up")
    if "error" in ready:
        await peer.process.wait()
        raise PeerUsageError(f"peer {peer.name}: {ready['error']}")
    try:
        peer.address = Address(str(ready["host"]), int(str(ready["port"])))
    except (KeyError, ValueError) as exc:
        raise StartupError(f"peer {peer.name} reported no address: {ready!r}") from exc
    peer.metrics = str(ready.get("metrics", ""))
    return peer.address


async def wait_joined(peer: PeerProcess) -> None:
    if not await peer.report("instead of the members it sees"):
        code = await peer.process.wait()
        raise StartupError(f"peer {peer.name} exited with code {code} while joining")


async def stop_peers(peers: Sequence[PeerProcess], cfg: LauncherConfig) -> None:
    """Close every child's control pipe (the stop signal), then kill what is still there
    after ``cfg.stop_grace_s``."""
    grace = cfg.stop_grace_s
    for peer in peers:
        await peer.ask_to_stop(cfg.stdin_close_s)
    with trio.move_on_after(grace):
        for peer in peers:
            await peer.process.wait()
    for peer in peers:
        if peer.process.returncode is None:
            log.warning("peer %s (pid %d) did not stop; killing it", peer.name, peer.process.pid)
            peer.process.kill()
            await peer.process.wait()
        await peer.reports.aclose()


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
    vetted: dict[str, Verdict] | None = None,
) -> AsyncIterator[list[PeerProcess]]:
    """Start ``count`` peers on 127.0.0.1; yield them once every one sees all the others;
    stop them all on the way out. ``vetted``: the launcher's verdicts on plugin modules."""
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
            seeds_later=True,
            expect=count,
            plugin_paths=plugin_paths,
            seed=None if seed is None else seed * 1000 + i,
            log_level=log_level,
            vetted=dict(vetted or {}),
        )

    try:
        with trio.fail_after(cfg.launcher.start_timeout_s):
            # The template only while they start: the peers need it no more then.
            launcher = cfg.launcher
            async with open_forker(
                launcher.fork_peers, stdout_for_peers(), PEER_MODULES, launcher.start_timeout_s
            ) as forker:
                for i in range(count):
                    peers.append(await start_peer(spec(i), forker))
            for peer in peers:
                await wait_bound(peer)
            # Everyone joins through the first peer; it starts the system alone.
            first = peers[0].address
            assert first is not None
            for i, peer in enumerate(peers):
                seeds = [] if i == 0 else [f"{first.host}:{first.port}"]
                await peer.control.send_all((json.dumps({"seeds": seeds}) + "\n").encode())
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
