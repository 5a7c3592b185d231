"""`satind start`: run and supervise this machine's peers in the foreground.

The supervisor starts ``daemon.peers`` peer processes named NODE/0, NODE/1, ... listening on
consecutive ports from ``daemon.port`` (port 0: any free ports, for tests; the log says which).
Peer 0 joins through the configured seeds (other machines); the others join through peer 0 and
the seeds. It logs to stderr and stays in the foreground, which is what systemd and container
runtimes expect.

* A peer that exits with code 0 was stopped or drained: it stays down. When every peer is down
  the supervisor exits 0.
* A peer that dies otherwise (a crash, SIGKILL) is restarted after ``daemon.restart_delay_s``
  (doubling on repeated crashes, up to a minute, of a peer that dies within
  ``daemon.restart_stable_s`` of its start) when ``daemon.restart`` is on; it comes back as a
  new instance in the same slot, and the others recover the old one's work. A restart that
  finds the peer's port still held (a child process of a plugin that outlived the old
  instance keeps its listening sockets) waits with the same back-off until it is free: only
  at the daemon's first start is a port in use a misconfiguration that stops it (exit 2).
* SIGTERM or SIGINT stops every peer the graceful way (``daemon.on_sigterm``: leave, or drain
  first) and exits 0.

The supervisor runs no plugin code. Before it starts a peer (the first time and at every
restart) it vets the plugin modules of the plugin paths (plugin.vet_plugins: each imported in
a short-lived process of its own, again only when its code changed) and hands the verdicts to
the peer, which imports only the modules that came through: a plugin that exits, raises or
hangs at import is logged once, with its file, and costs nothing else.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import signal
import socket
from dataclasses import dataclass
from pathlib import Path

import trio

import satind.plugin as plugin_mod
from satind.config import Config, DaemonConfig, default_peer_count, for_peer
from satind.net import tls
from satind.net.transport import Address, parse_address
from satind.node import history
from satind.ops import advertise, owner, ports
from satind.ops.forker import Forker, open_forker
from satind.ops.launcher import (
    EXIT_PORT_BUSY,
    EXIT_USAGE,
    PEER_MODULES,
    PeerProcess,
    PeerSpec,
    PeerUsageError,
    StartupError,
    start_peer,
    stdout_for_peers,
    stop_peers,
    wait_bound,
)

log = logging.getLogger(__name__)


class DaemonError(Exception):
    """The daemon cannot start or go on; the message says what to fix."""


class PeerCannotRun(DaemonError):
    """A peer exited with a usage error (its credentials, configuration or address): it would
    fail the same way at every restart, so the daemon stops with its message instead."""


def node_name(cfg: Config) -> str:
    """This machine's name: the configured one, or the host name made certificate-safe."""
    if cfg.daemon.name:
        return cfg.daemon.name
    return re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname().split(".")[0]) or "node"


def restart_backoff(cfg: DaemonConfig, crashes: int, ran_s: float) -> tuple[int, float]:
    """After a crash of a peer that ran ``ran_s`` seconds, with ``crashes`` crashes in a row
    before: the new count, and how long to wait before the restart (doubling with each crash
    in a row of a peer that dies within ``restart_stable_s`` of its start, up to
    ``restart_max_delay_s``)."""
    crashes = 1 if ran_s >= cfg.restart_stable_s else crashes + 1
    return crashes, min(cfg.restart_max_delay_s, cfg.restart_delay_s * 2 ** (crashes - 1))


@dataclass
class Slot:
    """One peer position on this machine and its current process."""

    spec: PeerSpec
    process: PeerProcess | None = None
    # Crashes in a row, each within daemon.restart_stable_s of its start (the back-off).
    crashes: int = 0
    started_at: float = 0.0
    stopped: bool = False
    # Why its last restart could not listen (its port still held), or "".
    busy: str = ""


class Supervisor:
    def __init__(self, cfg: Config, log_level: str) -> None:
        self.node = node_name(cfg)
        if cfg.history.enabled and not cfg.history.path:
            # The machine's history file outlives its peers: one place per machine name.
            path = str(history.default_path(self.node))
            cfg = dataclasses.replace(cfg, history=dataclasses.replace(cfg.history, path=path))
        self.cfg = cfg
        d = cfg.daemon
        if not d.keys:
            raise DaemonError(
                "no keys directory: pass --keys DIR (make one with `satind keys init DIR` and "
                f"`satind keys issue DIR {self.node}`)"
            )
        # Loaded once, here, and handed to every peer process (also when it restarts one):
        # a key file that changes or goes away later cannot stop a restart. Rotating keys
        # means restarting the daemon (drain it first to lose nothing).
        credentials = tls.Credentials.load(Path(d.keys), self.node, tls.ROLE_PEER)
        try:
            seeds = [parse_address(s) for s in d.seeds]
        except ValueError as exc:
            raise DaemonError(f"bad seed: {exc}") from None
        # The address the peers give the members (ops/advertise.py): the listening one
        # unless it is every interface's, which no other machine could dial.
        self.advertised: Address | None = None
        self.advertised_why = ""
        try:
            if d.advertise:
                self.advertised = advertise.parse_advertise(d.advertise)
                self.advertised_why = "--advertise"
            elif advertise.unspecified(d.host):
                host, self.advertised_why = advertise.choose(seeds)
                self.advertised = Address(host, 0)
        except (ValueError, advertise.NoAddress) as exc:
            raise DaemonError(str(exc)) from None
        # What outlives the peers (node/remember.py): the members they last saw alive.
        self.state_dir: Path | None = None
        if d.remember_members:
            self.state_dir = Path(d.state_dir) if d.state_dir else history.state_dir()
        count = d.peers or default_peer_count()
        if not (d.port >= 0 and d.port + count - 1 < 65536):
            raise DaemonError(f"ports {d.port}..{d.port + count - 1} are not valid")
        self.seeds = seeds
        self.slots = [
            Slot(
                PeerSpec(
                    name=f"{self.node}/{i}",
                    cluster=d.cluster,
                    listen=Address(d.host, d.port + i if d.port else 0),
                    cfg=for_peer(cfg, i),
                    credentials=credentials if cfg.net.tls else None,
                    seeds=list(seeds),
                    state_dir=self.state_dir,
                    advertise=(
                        advertise.for_peer(self.advertised, i)
                        if self.advertised is not None
                        else None
                    ),
                    plugin_paths=[Path(p) for p in d.plugin_paths],
                    log_level=log_level,
                    standby=d.standby,
                )
            )
            for i in range(count)
        ]
        self._stopping = False
        self._all_stopped = trio.Event()
        # The verdicts on the plugin modules (handed to each peer), and the failures logged.
        self._vetted: dict[str, plugin_mod.Verdict] = {}
        self._said: set[str] = set()
        # Why the daemon stopped on its own (a peer that cannot run), or None.
        self.fatal: str | None = None
        # The owner watch's last verdict ([owner] reclaim): a peer restarted meanwhile is
        # reclaimed as soon as it is up.
        self.owner_busy = False
        # The template peers are forked from (ops/forker.py), while ``run`` runs.
        self.forker: Forker | None = None

    def _stopped(self, slot: Slot) -> None:
        slot.stopped = True
        if all(s.stopped for s in self.slots):
            self._all_stopped.set()

    async def _vet(self) -> None:
        """Vet the plugin modules whose code changed since the last time (none, usually).

        Raises:
            DaemonError: a plugin path is not a directory.
        """
        paths = self.slots[0].spec.plugin_paths
        try:
            found = await trio.to_thread.run_sync(
                plugin_mod.vet_plugins, paths, self.cfg.plugins, self._vetted
            )
        except FileNotFoundError as exc:
            raise DaemonError(str(exc)) from None
        self._vetted = found.verdicts
        for failure in found.failures:
            if failure not in self._said:
                log.warning("%s", failure)
        self._said = set(found.failures)
        for slot in self.slots:
            slot.spec.vetted = dict(self._vetted)

    async def run(self) -> int:
        await self._vet()
        await self._check_history()
        # The peers' template lives as long as the daemon: a restarted peer starts at once.
        launcher = self.cfg.launcher
        async with open_forker(
            launcher.fork_peers, stdout_for_peers(), PEER_MODULES, launcher.start_timeout_s
        ) as forker:
            self.forker = forker
            return await self._run()

    async def _run(self) -> int:
        async with trio.open_nursery() as nursery:
            # Peer 0 first: the others join through it (and the configured seeds).
            await self._start(self.slots[0])
            first = self.slots[0].process
            assert first is not None and first.address is not None
            for slot in self.slots[1:]:
                slot.spec.seeds = self._seeds_for(slot)
                await self._start(slot)
            addresses = ", ".join(
                f"{s.spec.name}={s.process.address}" for s in self.slots if s.process is not None
            )
            log.info("satind %s (cluster %s): %s", self.node, self.cfg.daemon.cluster, addresses)
            if self.advertised is not None:
                log.info(
                    "satind %s listens on %s and gives the members %s (%s)",
                    self.node,
                    self.cfg.daemon.host,
                    self.advertised.host,
                    self.advertised_why,
                )
            if self.cfg.history.enabled:
                log.info("satind %s run history: %s", self.node, self.cfg.history.path)
            if self.cfg.metrics.enabled:
                urls = ", ".join(
                    f"{s.spec.name}={s.process.metrics}"
                    for s in self.slots
                    if s.process is not None
                )
                log.info("satind %s metrics: %s", self.node, urls)
            for slot in self.slots:
                nursery.start_soon(self._watch, slot)
            nursery.start_soon(self._signals, nursery.cancel_scope)
            if self.cfg.owner.reclaim:
                nursery.start_soon(owner.watch, self.cfg.owner, self._peer_pids, self._owner)
            await self._all_stopped.wait()
            nursery.cancel_scope.cancel()
        if self.fatal is not None:
            raise PeerCannotRun(self.fatal)
        return 0

    async def _check_history(self) -> None:
        """Open the run history once here, so that a file it refuses (foreign, newer,
        corrupt) is said once and clearly; the peers then run without one."""
        h = self.cfg.history
        if not h.enabled:
            return
        try:
            await trio.to_thread.run_sync(history.HistoryStore(Path(h.path), h).open)
        except history.HistoryError as exc:
            log.error("satind %s keeps no run history: %s", self.node, exc)
            off = dataclasses.replace(h, enabled=False)
            self.cfg = dataclasses.replace(self.cfg, history=off)
            for slot in self.slots:
                slot.spec.cfg = dataclasses.replace(slot.spec.cfg, history=off)

    def _seeds_for(self, slot: Slot) -> list[Address]:
        """Where a peer joins: through this machine's other peers, then the configured seeds.
        Also at a restart, and also peer 0: on the first machine (no seeds) a restarted peer 0
        started with none and stayed alone for good — the others dial the old instance's
        address, find a newer one there and hang up — and ran the runs submitted to it alone
        (benchmarks/soak.py)."""
        siblings = [
            s.process.address
            for s in self.slots
            if s is not slot and s.process is not None and s.process.address is not None
        ]
        return [*siblings, *self.seeds]

    async def _start(self, slot: Slot, first: bool = True) -> None:
        """Start a slot's peer and wait until it listens.

        Raises:
            PeerCannotRun: it exited with a usage error; at a restart (not ``first``), one
                whose port is still held is not one: that peer exits, and ``_watch`` tries
                again after the back-off.
            DaemonError: it did not start (it is killed; ``_watch`` restarts it).
        """
        slot.busy = ""
        try:
            slot.process = await start_peer(slot.spec, self.forker)
            slot.started_at = trio.current_time()
        except OSError as exc:  # no process to be had (fork, pipes): a crash like any other
            raise DaemonError(f"cannot start peer {slot.spec.name}: {exc}") from None
        try:
            with trio.fail_after(self.cfg.launcher.start_timeout_s):
                await wait_bound(slot.process)
        except PeerUsageError as exc:
            # At the first start a port in use is a misconfiguration (another program has
            # it, or a second daemon): exit 2, as systemd's RestartPreventExitStatus=2
            # expects. At a restart it is most likely a process the old instance left
            # holding its listening sockets (a plugin's forked child): it goes away.
            if first or slot.process.process.returncode != EXIT_PORT_BUSY:
                raise PeerCannotRun(str(exc)) from None
            slot.busy = str(exc)
            return
        except (StartupError, trio.TooSlowError) as exc:
            # Not left half-started: _watch sees it die and restarts it (with back-off).
            if slot.process.process.returncode is None:
                slot.process.process.kill()
            raise DaemonError(f"peer {slot.spec.name} did not start: {exc}") from None
        if self.owner_busy:
            slot.process.process.send_signal(signal.SIGUSR1)

    async def _stop_all_because(self, why: str) -> None:
        """A peer cannot run: stop every peer and let ``run`` end with ``why``."""
        log.error("%s; stopping every peer", why)
        self.fatal = why
        self._stopping = True
        processes = [s.process for s in self.slots if s.process is not None]
        with trio.CancelScope(shield=True):
            await stop_peers(processes, self.cfg.launcher)
        for slot in self.slots:
            slot.stopped = True
        self._all_stopped.set()

    async def _watch(self, slot: Slot) -> None:
        while True:
            assert slot.process is not None
            code = await slot.process.process.wait()
            if code == 0 or self._stopping:
                log.info("peer %s stopped", slot.spec.name)
                self._stopped(slot)
                return
            if code == EXIT_USAGE:
                why = await _error_line(slot.process, self.cfg.launcher.stop_grace_s)
                why = why or "see its log above"
                await self._stop_all_because(
                    f"peer {slot.spec.name} cannot run (exit {code}): {why}"
                )
                return
            await slot.process.aclose()
            ran = trio.current_time() - slot.started_at
            slot.crashes, delay = restart_backoff(self.cfg.daemon, slot.crashes, ran)
            if not self.cfg.daemon.restart:
                log.error("peer %s died (exit %d); not restarting", slot.spec.name, code)
                self._stopped(slot)
                return
            if code == EXIT_PORT_BUSY and slot.busy:
                log.warning(
                    "peer %s cannot listen yet, its port is still held%s (%s); trying again "
                    "in %.1f s",
                    slot.spec.name,
                    await self._holders(slot),
                    slot.busy,
                    delay,
                )
            else:
                log.error(
                    "peer %s died (exit %d); restarting in %.1f s", slot.spec.name, code, delay
                )
            await trio.sleep(delay)
            if self._stopping:
                self._stopped(slot)
                return
            try:
                await self._vet()  # the plugin files may have changed (`plugins reload`)
                slot.spec.seeds = self._seeds_for(slot)
                await self._start(slot, first=False)
            except PeerCannotRun as exc:
                await self._stop_all_because(str(exc))
                return
            except DaemonError as exc:
                log.error("%s", exc)

    @staticmethod
    async def _holders(slot: Slot) -> str:
        """Who holds the ports a slot's peer listens on, as " by pid N, M" ("" when /proc
        does not say); in a worker thread: it reads every process's file descriptors."""
        cfg = slot.spec.cfg
        wanted = [slot.spec.listen.port, cfg.metrics.port if cfg.metrics.enabled else 0]
        found = await trio.to_thread.run_sync(ports.holders, wanted)
        return f" by pid {', '.join(map(str, found))}" if found else ""

    def _live(self) -> list[PeerProcess]:
        """Peer processes running and up: a peer that has not reported its address yet may
        not have opened its owner-signal receiver, and SIGUSR1's default action would end it
        (``_start`` signals it once it is up)."""
        return [
            s.process
            for s in self.slots
            if s.process is not None
            and s.process.address is not None
            and s.process.process.returncode is None
        ]

    def _peer_pids(self) -> list[int]:
        return [p.process.pid for p in self._live()]

    def _owner(self, busy: bool) -> None:
        """The owner watch's verdict (ops/owner.py) to every peer; kept for the peers this
        daemon restarts meanwhile (``_start``)."""
        self.owner_busy = busy
        for p in self._live():
            p.process.send_signal(signal.SIGUSR1 if busy else signal.SIGUSR2)

    async def _signals(self, scope: trio.CancelScope) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    # Each peer rescans its plugin paths (`satind plugins reload`).
                    log.info("SIGHUP: every peer reloads its plugins")
                    for slot in self.slots:
                        if slot.process is not None and slot.process.process.returncode is None:
                            slot.process.process.send_signal(signal.SIGHUP)
                    continue
                log.info("%s: stopping every peer", signal.Signals(signum).name)
                self._stopping = True
                processes = [s.process for s in self.slots if s.process is not None]
                if self.cfg.daemon.on_sigterm == "drain":
                    for p in processes:
                        if p.process.returncode is None:
                            p.process.send_signal(signal.SIGTERM)  # the child drains, then exits
                    return
                with trio.CancelScope(shield=True):
                    await stop_peers(processes, self.cfg.launcher)
                return


async def _error_line(peer: PeerProcess, within_s: float) -> str:
    """What a peer that exited with a usage error said about it on its report pipe (child's
    ``_usage_error``), or "" if nothing."""
    data = b""
    with trio.move_on_after(within_s):
        while len(data) < 65536:
            chunk = await peer.reports.receive_some(4096)
            if not chunk:
                break
            data += chunk
    for line in data.splitlines():
        try:
            said = json.loads(line)
        except ValueError:
            continue
        error = said.get("error") if isinstance(said, dict) else None
        if isinstance(error, str):
            return error
    return ""
