"""The Python client API, async form (trio): ``open_cluster`` gives a ``Cluster``, whose
``submit`` gives a ``Run``. The synchronous form (client/sync.py) and the command line
(satind/cli/) are made of these; docs/client.md is their guide.

A run is submitted either by plugin name with string arguments, parsed on the master as
``satind submit`` does, or as one @spawnable function of a plugin's module with Python values
as its arguments (``Submit.entry``): the values travel in satind's codec (CBOR, registered
types included, never pickle), and every member has the function because it has the plugin.
"""

from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio

from satind import config as config_mod
from satind import stats
from satind.client import client as remote
from satind.client.errors import Refused, run_error
from satind.client.files import ClientFiles
from satind.client.follow import follow_result
from satind.client.submission import Ship, shipment, submission
from satind.client.target import Target as Target
from satind.client.target import load_config as load_config
from satind.client.target import target as target
from satind.net import codec
from satind.net import messages as m
from satind.plugin.shipped import Bundle


def log_time(at: float) -> str:
    """When a line of a run's output was written (seconds since the epoch, by the clock of the
    peer that ran the job), as `satind logs` shows it: ISO 8601 in UTC to the millisecond,
    ``2026-11-26T10:01:02.345Z``. UTC, not the local zone: lines of machines in different
    zones, and of a terminal in a third, read the same."""
    moment = datetime.datetime.fromtimestamp(at, datetime.UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def _shown(reply: m.LogsReply, timestamps: bool) -> list[str]:
    if not timestamps:
        return list(reply.lines)
    return [f"{log_time(at)} {line}" for at, line in zip(reply.times, reply.lines, strict=True)]


@dataclass(frozen=True)
class RunInfo:
    """One run as the cluster reports it (``Cluster.runs()``)."""

    id: str
    plugin: str
    argv: list[str]
    master: str
    state: str  # queued, running, done, failed, suspended, cancelled, checkpointed
    progress: float
    elapsed_s: float
    # Running, and no peer has begun any of its jobs yet: it waits for peers (its root is
    # queued behind other runs' work). Its elapsed time counts the wait.
    waiting: bool = False


# One run as the run history keeps it (``Cluster.history()``): its fields are documented
# in satind/net/records.py (times in seconds since the Unix epoch).
RunRecord = m.RunRecord


@dataclass(frozen=True)
class PeerInfo:
    """One peer as the cluster reports it (``Cluster.peers()``)."""

    name: str
    cluster: str
    state: str  # alive, suspect, dead, left, draining, reclaimed, standby
    address: str
    jobs_run: int
    cpu_percent: float
    rss_mb: float


@dataclass
class Outcome:
    """Everything a finished run gave: its value, what the plugin's report and check made
    of it on the master, and the run's statistics."""

    run_id: str
    value: Any
    report: Any
    check: str
    elapsed_s: float
    peers: int
    stats: dict[str, int | float] = field(default_factory=dict)
    # The output files the plugin's report made, by the argument naming each (to write where
    # you like), or, when the master's operator keeps them, where they are ("PEER:PATH").
    outputs: dict[str, bytes] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)

    @property
    def efficiency(self) -> float | None:
        """busy_s / (peers x elapsed_s): the run's efficiency from the peers' own accounting
        (``stats.efficiency``)."""
        return stats.efficiency(self.stats, self.peers, self.elapsed_s)


class Run:
    """A run submitted to (or found on) a cluster. Its methods ask the peer the cluster is
    connected to, which relays to the run's master wherever it is."""

    def __init__(self, cluster: Cluster, run_id: str, mine: bool = False) -> None:
        self.cluster = cluster
        self.id = run_id
        # Submitted on this connection: its result comes on it (else it is asked for).
        self._mine = mine
        self._result: m.RunResult | None = None

    def __repr__(self) -> str:
        return f"<satind.Run {self.id}>"

    async def info(self) -> RunInfo:
        """The run's line in the cluster's status.

        Raises:
            LookupError: the cluster has no such run (any more).
        """
        for run in await self.cluster.runs():
            if run.id == self.id:
                return run
        raise LookupError(f"the cluster has no run {self.id}")

    async def status(self) -> str:
        """queued, running, done, failed, suspended, cancelled or checkpointed."""
        return (await self.info()).state

    async def waiting(self) -> bool:
        """Whether the run waits for peers: running, and no peer has begun any of its jobs
        yet (its root is queued behind other runs' work)."""
        return (await self.info()).waiting

    async def progress(self) -> float:
        """The share of the run's work done, in [0, 1] (estimated from job ids while it runs;
        -1 when the peer knows no such running run)."""
        client = self.cluster.client
        reply = await client.progress(self.id, self.cluster.cfg.client.timeout_s)
        if reply is None:
            return (await self.info()).progress
        return reply.progress if reply.progress >= 0 else (await self.info()).progress

    async def logs(self, follow: bool = False, timestamps: bool = False) -> AsyncIterator[str]:
        """The run's output lines (what its jobs print or log, on every peer: "PEER: text"),
        from its first; with ``follow``, then each new one until the run ends. With
        ``timestamps``, each line begins with when it was written (``log_time``)."""
        client = self.cluster.client
        cfg = self.cluster.cfg
        start = 0
        while True:
            reply = await client.logs(self.id, start, cfg.client.timeout_s)
            if reply is None:
                raise remote.PeerUnavailable(f"no answer about the output of run {self.id}")
            if reply.error and not reply.lines:
                raise LookupError(reply.error)
            for line in _shown(reply, timestamps):
                yield line
            start = reply.next
            if not follow:
                return
            if reply.over:
                # Every peer's last lines reach the master within run.log_tail_s.
                await trio.sleep(cfg.run.log_tail_s)
                last = await client.logs(self.id, start, cfg.client.timeout_s)
                for line in _shown(last, timestamps) if last is not None else []:
                    yield line
                return
            await trio.sleep(cfg.run.log_flush_s)

    async def cancel(self) -> None:
        """Cancel the run (its result then raises ``RunCancelled``).

        Raises:
            Refused: the run cannot be cancelled (no such run, or it is over).
        """
        await self.cluster._control(m.CancelRequest(self.cluster.client.requests.new(), self.id))

    async def outcome(self, progress: Callable[[float], None] | None = None) -> Outcome:
        """Wait for the run to end; its value with the plugin's report and check, and its
        statistics. (To bound the wait: ``with trio.fail_after(seconds):``.) ``progress``,
        if given, is called with the share of the work done every ``client.watch_interval_s``
        meanwhile (what the synchronous form draws a bar with).

        Raises:
            RunCancelled, RunSuspended, RunLost; the job's exception (see ``result``).
        """
        if progress is None:
            result = await self._wait()
        else:
            result = await self._wait_watched(progress)
        if result.error is not None:
            raise run_error(self.id, result.error)
        depth = self.cluster.cfg.net.max_depth
        assert result.value is not None
        value = codec.decode_value(result.value, depth)
        report = value if result.report is None else codec.decode_value(result.report, depth)
        return Outcome(
            self.id,
            value,
            report,
            result.check,
            result.elapsed_s,
            result.peers,
            dict(result.stats),
            dict(result.outputs),
            dict(result.kept),
        )

    async def result(self, progress: Callable[[float], None] | None = None) -> Any:
        """Wait for the run to end and return its value, decoded here (a registered type as
        itself when this process registered it too). To bound the wait, as anywhere in trio:
        ``with trio.fail_after(seconds):`` (the run goes on).

        Raises:
            RunCancelled, RunSuspended: an operator (or ``cancel()``) stopped it.
            RunLost: no peer could give its result any more.
            the job's exception, as itself when it can be rebuilt here, else RunFailed.
        """
        return (await self.outcome(progress)).value

    async def _wait_watched(self, progress: Callable[[float], None]) -> m.RunResult:
        async with trio.open_nursery() as nursery:

            async def poll() -> None:
                while True:
                    # A question unanswered in time is no reason to stop waiting for the run.
                    with contextlib.suppress(remote.PeerUnavailable, LookupError):
                        progress(max(0.0, await self.progress()))
                    await trio.sleep(self.cluster.cfg.client.watch_interval_s)

            nursery.start_soon(poll)
            result = await self._wait()
            nursery.cancel_scope.cancel()
        progress(1.0)
        return result

    async def _wait(self) -> m.RunResult:
        if self._result is None:
            self._result = await self.result_message()
        return self._result

    async def result_message(self, output: Callable[[str], None] | None = None) -> m.RunResult:
        """The run's result as it came (what ``outcome`` and the command line read), passing
        each line of the run's output to ``output`` meanwhile, if given. When the peer is
        lost (a crash; the run goes on under an elected master) it is asked of the other
        members the run was accepted with.

        Raises:
            RunLost: no other member knew the run for ``client.follow_s``.
            LookupError: the cluster has no such run.
        """
        client = self.cluster.client
        try:
            if self._mine:
                if output is not None:
                    return await client.result_with_output(self.id, output)
                return await client.result(self.id)
            reply = await client.fetch_result(self.id, True, self.cluster.cfg.client.timeout_s)
            if reply.result is None:
                raise LookupError(reply.error or f"no result for run {self.id}")
            return reply.result
        except remote.PeerUnavailable as exc:
            if output is not None:
                output(f"satind: {exc}; following run {self.id} through the other peers")
            return await follow_result(
                self.id, client.follow_addresses(), self.cluster.cfg, client.transport.credentials
            )


class Cluster:
    """A connection to one peer of a satind cluster, through which the whole cluster is
    used (that peer relays to the others)."""

    def __init__(self, client: remote.Client, cfg: config_mod.Config) -> None:
        self.client = client
        self.cfg = cfg

    @property
    def peer(self) -> str:
        """The name of the peer this connection is to."""
        return self.client.peer

    async def submit(
        self,
        what: Any,
        *args: Any,
        check: bool = True,
        files: ClientFiles | None = None,
        ship: Ship = None,
        weight: float = 1.0,
    ) -> Run:
        """Submit a run: ``submit("nqueens", "14")`` by plugin name with command-line
        arguments, or ``submit(fn, *values)`` for a @spawnable function of a plugin's module
        with Python values. ``check=False``: the master skips the plugin's check. An input
        file an argument names that the master asks for is read here (relative to the
        current directory), as ``satind submit`` does; ``files`` stands for that.

        ``ship``: send the plugin's code with the run instead of relying on what the peers
        have installed — a directory (its ``*.py`` files, a package root), a module (its
        file's directory), or True (the directory of the submitted function's plugin file).
        The peers must accept shipped code and the certificate have the "ship" grant.

        ``weight``: the run's share of the peers beside other runs at once (more than 0, at
        most 1000): thieves take a run of weight 2 twice as often as one of weight 1.

        Raises:
            BadArguments (a ``satind.UsageError``): the plugin refused the arguments.
            NoSuchPlugin: no peer has the plugin; VersionMismatch: members lack it or have
                another version; Refused: any other refusal.
            TypeError, ValueError: ``what`` cannot be submitted (see ``submission``).
            PeerUnavailable: no answer.
        """
        if why := m.weight_problem(weight):
            raise ValueError(why)
        plugin, argv, entry, values = submission(what, args, self.cfg.net.max_frame_bytes)
        if files is None and argv:
            files = ClientFiles(argv, self.cfg.files.max_input_bytes)
        code, code_hash = shipment(what, ship, self.cfg)
        run_id = await self.client.submit(
            plugin,
            argv,
            code_hash,
            check=check,
            files=files,
            entry=entry,
            values=values,
            code=code,
            weight=weight,
        )
        return Run(self, run_id, mine=True)

    async def submit_entry(
        self, plugin: str, entry: str, values: bytes, code: Bundle, code_hash: str
    ) -> Run:
        """Submit a run of the function ``entry`` of ``plugin`` in shipped ``code``, with
        encoded ``values`` (what satind.Executor submits; ``submit`` for anything else)."""
        run_id = await self.client.submit(
            plugin, [], code_hash, check=False, entry=entry, values=values, code=code
        )
        return Run(self, run_id, mine=True)

    async def run(self, what: Any, *args: Any) -> Any:
        """``submit`` then ``result``: the run's value."""
        return await (await self.submit(what, *args)).result()

    def get_run(self, run_id: str) -> Run:
        """A run by id, submitted by anyone (its methods fail if there is no such run)."""
        return Run(self, run_id)

    async def runs(self) -> list[RunInfo]:
        """Every run the cluster knows (running, queued, and those that ended lately)."""
        reply = await self.client.status()
        return [
            RunInfo(
                r.run_id,
                r.plugin,
                list(r.argv),
                r.master,
                r.state,
                r.progress,
                r.elapsed_s,
                r.waiting,
            )
            for r in reply.runs
        ]

    async def history(
        self,
        states: Sequence[str] = (),
        since: float = 0.0,
        limit: int = 20,
        run_id: str = "",
    ) -> list[RunRecord]:
        """Runs from the run history every machine keeps (it outlives restarts; `satind
        runs`), newest first, with the runs going on now: the newest ``limit`` that ended
        at or after ``since`` (seconds since the Unix epoch; 0: any) in ``states`` (empty:
        any), or the one run ``run_id`` with the tail of its output. A client with only the
        submit grant gets its own runs.

        Raises:
            LookupError: no history answered (off on the peers, or their files refused).
        """
        reply = await self.client.history(run_id, states, since, limit)
        if not reply.runs and reply.error:
            raise LookupError(reply.error)
        return list(reply.runs)

    async def peers(self) -> list[PeerInfo]:
        """Every member the connected peer knows, itself first."""
        reply = await self.client.status()
        return [
            PeerInfo(p.name, p.cluster, p.state, p.address, p.jobs_run, p.cpu_percent, p.rss_mb)
            for p in reply.peers
        ]

    async def drain(
        self, *peers: str, cluster: str = "", deadline: float | None = None
    ) -> list[str]:
        """Drain peers (by name, ``m1/0``, or a machine's name for all of its peers) or a
        whole cluster: each hands its work and results over and leaves. ``deadline``:
        seconds they go on finishing their work before each leaves at once, its unfinished
        work cut and computed again by its owners, its finished results reused (0: now;
        None: each peer's ``[daemon] drain_deadline_s``). Returns the peers affected.

        Raises:
            Refused: nothing to drain by those names (the message says what there is).
        """
        if bool(peers) == bool(cluster):
            raise ValueError("give peers to drain, or cluster=NAME, not both")
        if deadline is not None and not deadline >= 0:
            raise ValueError(f"deadline must be 0 or more seconds, got {deadline}")
        wire = -1.0 if deadline is None else float(deadline)
        msg = m.DrainRequest(self.client.requests.new(), list(peers), cluster, wire)
        return list((await self._control(msg)).affected)

    async def resume(self, run_id: str) -> Run:
        """Resume a suspended or checkpointed run from its checkpoints.

        Raises:
            Refused: no checkpoint of the run on the connected peer.
        """
        return Run(self, await self.client.resume(run_id), mine=True)

    async def suspend(self, run_id: str) -> str:
        """Suspend a run: it stops, and ``resume`` continues it from its checkpoints (the
        peers need a checkpoint directory). Returns what the master said.

        Raises:
            Refused: it cannot be (no such run, no checkpoints).
        """
        msg = m.SuspendRequest(self.client.requests.new(), run_id)
        return (await self._control(msg, self.cfg.client.suspend_timeout_s)).message

    async def _control(self, msg: m.Message, within_s: float | None = None) -> m.ControlReply:
        reply = await self.client.control(msg, within_s)
        if not reply.ok:
            raise Refused(reply.message)
        return reply


@asynccontextmanager
async def open_cluster(
    to: str | None = None,
    keys: str | os.PathLike[str] | None = None,
    *,
    name: str | None = None,
    config: str | os.PathLike[str] | config_mod.Config | None = None,
) -> AsyncIterator[Cluster]:
    """Connect to the peer at ``to`` (HOST:PORT) with the client certificate in ``keys``
    (see ``target`` for the defaults), for the body of an ``async with``.

    Raises:
        PeerUnavailable: the peer cannot be reached.
        ValueError: see ``target``.
    """
    where = target(to, keys, name=name, config=config)
    credentials = where.credentials if where.cfg.net.tls else None
    async with remote.connect(where.address, where.cfg, credentials) as client:
        yield Cluster(client, where.cfg)
