"""One peer: the trio shell around the protocol core.

``Peer.run`` opens the peer's one nursery: the transport, the failure detector, the steal
loop, the compute side, the custody loop and the checkpoint loop live in it. The peer's
decisions are the core's (``satind/core``, ``satind/recovery``): plain functions of the peer's
state (``PeerState``), an event and the time, returning effects. This module only wires:
it hands every message, membership change and compute-side hook to its core handler, applies
the effects in order (``apply``), and starts the procedures that have to wait for other
members (``node/control.py``).

The transport is injected: TCP/TLS by default, the simulator's in-memory network when the
simulator builds the peer; so is the compute driver (a thread, or the simulator's lockstep).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import trio

import satind.plugin as plugins
from satind.adaptivity.measure import AppBenchmarks
from satind.config import Config
from satind.core import logged, thief
from satind.core.effects import Effects
from satind.core.events import (
    CpuShareMeasured,
    CustodyRound,
    MemberChanged,
    OrphanTable,
    ReclaimChanged,
    RunsHeard,
    Synced,
    TuplesHeard,
)
from satind.core.handle import handle
from satind.core.runs import PeerRun
from satind.core.state import PeerState
from satind.engine.frames import Snapshot, WorkerHooks
from satind.engine.worker import Worker
from satind.membership.swim import Swim
from satind.membership.view import Change, Member, MemberTable
from satind.net import messages as m
from satind.net.names import peer_name, slot_of
from satind.net.requests import Requests
from satind.net.transport import Address, Identity, Link, TcpTransport, TrafficCounters
from satind.node import control, draining, remember
from satind.node.adapt import Coordinator
from satind.node.announce import TupleAnnouncer
from satind.node.checkpoint import Checkpointer
from satind.node.compute import ComputeDriver, ThreadCompute
from satind.node.dispatch import dispatch
from satind.node.effects import apply_effects, write_notes
from satind.node.history import Recorder
from satind.node.hooks import ComputeHooks
from satind.node.host import PeerOptions, new_run_id
from satind.node.logs import RunLogs, flush_loop
from satind.node.parsing import ClientSlots
from satind.node.profiler import profile_loop
from satind.node.reclaims import Reclaims
from satind.node.tasks import Tasks
from satind.node.thief import Thief
from satind.node.tracing import RecoveryWatch
from satind.plugin import requirements
from satind.plugin.shipped import Cache
from satind.trace import Traces

if TYPE_CHECKING:
    from satind.node.dashboard import DashboardServer
    from satind.node.metrics import MetricsServer

log = logging.getLogger(__name__)

MessageHandler = Callable[[Any, m.Message], None]


class PeerTransport(Protocol):
    """What a peer needs of its network (TcpTransport, or the simulator's MemoryTransport)."""

    counters: TrafficCounters

    async def run(
        self, listen: Address | None = None, *, task_status: trio.TaskStatus[Address | None]
    ) -> None: ...

    def post(self, dest: str, msg: m.Message) -> bool: ...

    def post_address(self, address: Address, msg: m.Message, quiet: bool = False) -> None: ...


TransportFactory = Callable[[Identity, Address, MessageHandler], PeerTransport]
ComputeFactory = Callable[[WorkerHooks], ComputeDriver]


class Peer:
    """A satind peer: create it, then ``await peer.run()`` inside a nursery."""

    def __init__(
        self,
        cfg: Config,
        options: PeerOptions,
        *,
        transport: TransportFactory | None = None,
        compute: ComputeFactory | None = None,
    ) -> None:
        self.cfg = cfg
        self.options = options
        instance = options.instance if options.instance is not None else time.time_ns()
        # This process's member name: its slot (options.name, NODE/INDEX) and its instance.
        # What it is responsible for is recorded against this name, so a restart in the same
        # slot is a new member and the old one's work is recovered (membership/view.py).
        self.name = peer_name(options.name, instance)
        rng = random.Random(options.seed)
        found = (
            options.plugins
            if options.plugins is not None
            else plugins.discover(options.plugin_paths, cfg.plugins)
        )
        me = Member(
            self.name,
            options.listen,
            options.cluster,
            instance=instance,
            plugins=requirements.gossiped(found),
        )
        table = MemberTable(me)
        table.on_usurped = lambda name, slot: log.warning(
            "%s runs in our slot %s, started after us", name, slot
        )
        self.state = PeerState(self.name, options.cluster, cfg, table, found)
        self.state.unmet = requirements.unmet_here(found)
        for (name, _), why in self.state.unmet.items():
            log.warning("plugin %s: this peer takes no part in its runs: it requires %s", name, why)
        self.state.orphans.keep_results = cfg.ft.keep_results
        self.state.runs.keep_results = cfg.run.keep_results
        self.state.runs.keep_results_s = cfg.run.keep_results_s
        self.state.needs_orphans = cfg.ft.orphans
        self.state.run_ids = options.run_ids if options.run_ids is not None else new_run_id
        self.requests = Requests()
        self.tasks = Tasks(cfg.net.max_requests_in_flight)
        self.checkpointer = Checkpointer(
            cfg.checkpoint, options.name, options.checkpoint_store, self.state.checkpoint
        )
        self.code_cache: Cache | None = None
        self.swim: Swim  # made below; the transport tells it of restarted members
        identity = Identity(self.name, options.cluster, "peer")
        self.transport: PeerTransport
        if transport is not None:
            self.transport = transport(identity, options.listen, self._on_message)
        else:
            self.transport = TcpTransport(
                identity,
                cfg.net,
                self._on_message,
                resolve=self._resolve,
                busy=self.tasks.busy,
                credentials=options.credentials,
                emulation=cfg.emulation,
                on_other_answered=lambda *met: self.swim.met_other(*met),
            )
        self.state.traffic = self.transport.counters
        # A compute thread of our own: a real machine, whose CPUs the profiler reads.
        self._real_compute = compute is None
        self.compute: ComputeDriver = (
            compute(ComputeHooks(self))
            if compute is not None
            else ThreadCompute(
                Worker(
                    cfg.engine,
                    ComputeHooks(self),
                    max_frame=cfg.net.max_frame_bytes,
                    value_depth=cfg.net.max_depth,
                )
            )
        )
        self.worker = self.compute.worker
        self.state.queue = self.worker.queue
        self.worker.replicas.peer_name = self.state.name
        if self.checkpointer.enabled and cfg.checkpoint.policy == "sel":
            self.worker.log_all = True
        if self.checkpointer.enabled:
            # Copies of the log on other members (core/logged.py, node/logged.py).
            self.checkpointer.keepers = lambda: logged.keepers(self.state, self.state.name)
            self.checkpointer.post = self.post
            self.checkpointer.spawn = self.spawn_task
        if self.checkpointer.enabled and cfg.checkpoint.policy == "tic":
            self.checkpointer.request_snapshot = lambda: self.compute.post(Snapshot())
        self.thief = Thief(cfg.steal, random.Random(rng.random()), self)
        self.announcer = TupleAnnouncer(
            cfg.ft.tuple_combine_s,
            cfg.ft.tuples_per_message,
            self.others,
            self.post,
            self.spawn_task,
        )
        self.swim = Swim(cfg.membership, self.state.table, self, random.Random(rng.random()))
        self.result_waiters: dict[str, list[trio.Event]] = {}
        self.stopped = trio.Event()
        self.joined = trio.Event()
        self._changed = trio.Event()
        # The running drain's deadline (node/draining.py): a later request may bring it
        # forward.
        self.drain_scope: trio.CancelScope | None = None
        # What jobs print, per run (node/logs.py; captured on peer processes only).
        self.logs = RunLogs(cfg.run, options.name)
        self.recorder = Recorder(cfg)  # the machine's run history ([history] path)
        # Submissions being parsed, per client certificate (run.parses_per_client).
        self.parses = ClientSlots(cfg.run.parses_per_client)
        self._cpu = (time.process_time(), time.monotonic(), 0.0)
        self.metrics: MetricsServer | None = None  # [metrics] enabled: the endpoint
        self.dashboard: DashboardServer | None = None  # [dashboard] enabled: the web page
        self.traces = self.worker.trace = Traces(cfg.trace)  # every run's, bounded
        self._recovery = RecoveryWatch()  # recovery events for the traces
        self.benchmarks = AppBenchmarks()  # the plugins' own, timed for self-adaptivity
        self.reclaims = Reclaims()  # by hand or by the owner watch (node/reclaims.py)
        self.coordinator = Coordinator(self)  # self-adaptivity: acts when [adapt] enabled

    def decisions(self) -> list[m.AdaptDecision]:
        return self.coordinator.recent()

    def masters_of(self, run_id: str) -> list[str]:
        """The masters a run had as this peer saw them, "SLOT@EPOCH", the first first."""
        return list(self._recovery.masters_seen.get(run_id, []))

    # -- convenience views of the state -----------------------------------------------------

    @property
    def table(self) -> MemberTable:
        return self.state.table

    @property
    def runs(self) -> Any:
        return self.state.runs

    @property
    def custody(self) -> Any:
        return self.state.custody

    @property
    def orphans(self) -> Any:
        return self.state.orphans

    @property
    def draining(self) -> bool:
        return self.state.draining

    def now(self) -> float:
        return trio.current_time()

    def others(self) -> list[str]:
        return self.state.others()

    # -- lifecycle --------------------------------------------------------------------------

    async def run(
        self, join: bool = True, *, task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until stopped; ``started`` reports, once listening, the address the members
        are given: the advertised one (``options.advertise``), else the bound one.

        ``join``: join through the options' seeds at once (else call ``join`` later).
        """
        # The core notes only what the log would show (it imports no logging itself): read
        # once logging is set up, as the peer starts.
        self.state.note_level = logging.getLogger("satind.core").getEffectiveLevel()
        wall_offset = self.options.wall_offset
        if wall_offset is None:
            wall_offset = time.time() - trio.current_time()
        self.state.wall_offset = wall_offset
        try:
            async with trio.open_nursery() as nursery:
                self.tasks.nursery = nursery
                bound = await nursery.start(self.transport.run, self.options.listen)
                assert bound is not None
                advertised = self.options.advertise
                address = bound
                if advertised is not None:
                    address = Address(advertised.host, advertised.port or bound.port)
                me = self.table.me
                self.table.set_me(
                    Member(me.name, address, me.cluster, instance=me.instance, plugins=me.plugins)
                )
                await nursery.start(self.thief.run)
                await nursery.start(self.swim.run)
                await nursery.start(self.compute.serve)
                if self.options.standby:
                    self.apply(handle(self.state, ReclaimChanged(False, True), self.now()))
                    self.reclaim(True, "standby: takes no work until admitted")
                if self.cfg.adapt.enabled:
                    await nursery.start(self.coordinator.run)
                nursery.start_soon(self._custody_loop)
                nursery.start_soon(flush_loop, self)
                if self.recorder.store is not None:
                    self.state.runs.history_owners.update(await self.recorder.open())
                    nursery.start_soon(self.recorder.run)
                if self._real_compute:
                    nursery.start_soon(profile_loop, self.state, self._cpu_share_measured)
                if self.cfg.metrics.enabled:
                    # Imported here: prometheus_client and what it pulls in cost an idle peer
                    # about 1.5 MB that a peer without metrics does not need.
                    from satind.node.metrics import MetricsServer

                    self.metrics = MetricsServer(self, self.cfg.metrics)
                    await nursery.start(self.metrics.run)
                if self.cfg.dashboard.enabled:
                    # Imported here, as the metrics endpoint: a peer without a dashboard
                    # does not pay for its modules.
                    from satind.node.dashboard import DashboardServer

                    self.dashboard = DashboardServer(self, self.cfg.dashboard)
                    await nursery.start(self.dashboard.run)
                if self.checkpointer.enabled:
                    nursery.start_soon(self.checkpointer.loop)
                    nursery.start_soon(control.find_checkpointed_runs, self)
                task_status.started(address)
                if join:
                    self.join(self.options.seeds)
                await self.stopped.wait()
                nursery.cancel_scope.cancel()
        finally:
            self.compute.stop()
            if self.code_cache is not None:
                self.code_cache.close()

    def join(self, seeds: Sequence[Address]) -> None:
        """Join the system through ``seeds`` and the members this machine remembered (none:
        start it); sets ``joined`` when done."""
        state_dir = self.options.state_dir
        known = remember.remembered(state_dir, self.name) if state_dir is not None else []

        async def go() -> None:
            if state_dir is not None:
                self.spawn_task(remember.remember_loop, self, state_dir)
            if not await self.swim.join(seeds, known):
                log.error(
                    "could not join through %s; dialling them every %g s until one answers",
                    ", ".join(map(str, seeds)),
                    self.cfg.membership.reconnect_interval_s,
                )
                await self.swim.joined()  # the reconnect loop goes on (membership/rejoin.py)
                log.info("joined the system")
            self.joined.set()

        self.spawn_task(go)

    def stop(self) -> None:
        self.stopped.set()

    def leave(self) -> None:
        """Announce that we leave (not crash), then stop."""
        self.swim.leave()

        async def after_announcing() -> None:
            await trio.sleep(self.cfg.membership.leave_linger_s)  # let the notices go out
            self.stop()

        self.spawn_task(after_announcing)

    def reclaim(self, reclaimed: bool, reason: str, by_owner: bool = False) -> None:
        """The machine's owner reclaims it (True: suspend the work here, take none) or
        releases it (False: go on where it was). Every member hears it at once; a master's
        scheduler counts it RECLAIMED (core/iterative.py). By whom: node/reclaims.py."""
        if not by_owner and not self.reclaims.by_hand(reclaimed):
            # Admitted, but the machine is its owner's now.
            self.apply(handle(self.state, ReclaimChanged(self.state.reclaimed, False), self.now()))
            log.info("released (%s), but its owner is using it: reclaimed until then", reason)
            return
        if self.state.reclaimed == reclaimed:
            return
        log.info("%s: %s", "reclaimed" if reclaimed else "released", reason)
        # Released: admitted too (a standby's first release).
        standby = None if reclaimed else False
        self.apply(handle(self.state, ReclaimChanged(reclaimed, standby), self.now()))
        self.swim.set_reclaimed(reclaimed)
        self.worker.reclaim(reclaimed)
        self.thief.update()
        self.changed()

    def owner_load(self, busy: bool) -> None:
        """The daemon's owner watch (ops/owner.py): the machine's owner is at work or gone."""
        verdict = self.reclaims.owner(busy, self.state.reclaimed)
        if verdict is not None:
            self.reclaim(verdict, f"its owner is {'at work' if verdict else 'gone'}", True)

    def drain(self, reason: str, leaving: Sequence[str] = (), deadline_s: float = -1.0) -> None:
        """Stop taking work, finish what is here, then leave (node/draining.py)."""
        draining.drain(self, reason, leaving, deadline_s)

    def machine(self) -> list[str]:
        """The live members this peer's machine runs (its slot's node: b/0, b/1, ...)."""
        node = slot_of(self.name).split("/")[0]
        return [mem.name for mem in self.table.alive() if mem.slot.split("/")[0] == node]

    def changed(self) -> None:
        """Wake whoever waits for this peer's state (idleness, runs, members) to change."""
        self._changed.set()
        self._changed = trio.Event()

    async def wait_changed(self) -> None:
        """Return at the next ``changed``."""
        await self._changed.wait()

    async def wait_for_members(self, count: int) -> None:
        """Return once at least ``count`` members (this one included) are alive."""
        while len(self.table.alive()) < count:
            await self._changed.wait()

    # -- tasks --------------------------------------------------------------------------------

    def spawn_task(self, fn: Any, *args: Any) -> None:
        """Run ``fn(*args)`` in the peer's nursery (node/tasks.py)."""
        self.tasks.spawn(fn, *args)

    def spawn_answer(self, link: Link, req: int, fn: Any, *args: Any) -> None:
        """As ``spawn_task``, for a task that answers request ``req`` (node/tasks.py)."""
        self.tasks.answer(link, req, fn, *args)

    # -- effects ------------------------------------------------------------------------------

    def apply(self, effects: Effects) -> None:
        """Carry out what the core decided, in order (node/effects.py)."""
        apply_effects(self, effects)
        if self.state.notes:
            write_notes(self.state)
        if effects:
            self._recovery.check(self)

    # -- membership (the SWIM service's host) --------------------------------------------------

    def _resolve(self, name: str) -> Address | None:
        # Any member we know, whatever its state: a peer wrongly declared dead still gets its
        # messages (dropping them would lose work), and a dead one simply does not answer.
        member = self.table.get(name)
        return member.address if member is not None else None

    def post(self, dest: str, msg: m.Message) -> bool:
        return self.transport.post(dest, msg)

    def post_address(self, address: Address, msg: m.Message, quiet: bool = False) -> None:
        self.transport.post_address(address, msg, quiet)

    def on_member_change(self, change: Change) -> None:
        self.apply(handle(self.state, MemberChanged(change), self.now()))

    def on_synced(self) -> None:
        self.apply(handle(self.state, Synced(), self.now()))  # elections are ours to decide now

    def _cpu_share_measured(self, share: float) -> None:
        self.apply(handle(self.state, CpuShareMeasured(share), self.now()))

    def on_runs(self, runs: Sequence[m.RunAnnounce]) -> None:
        self.apply(handle(self.state, RunsHeard(runs), self.now()))

    def on_tuples(self, tuples: Sequence[m.OrphanTuple]) -> None:
        self.apply(handle(self.state, TuplesHeard(tuples), self.now()))

    def run_announcements(self) -> list[m.RunAnnounce]:
        return self.state.runs.announcements()

    # -- the steal loop's host -----------------------------------------------------------------

    def take_stolen(self, spec: m.JobSpec, victim_name: str) -> bool:
        accepted, fx = thief.take(self.state, spec, victim_name, self.now())
        self.apply(fx)
        return accepted

    def got_orphan_table(self, tuples: list[m.OrphanTuple]) -> None:
        self.apply(handle(self.state, OrphanTable(tuples), self.now()))

    # -- loops ----------------------------------------------------------------------------------

    async def _custody_loop(self) -> None:
        """Ask thieves about jobs given long ago and not returned (core/custody.py); now and
        then, ask masters whether the runs we still track are still running."""
        every = self.cfg.steal.custody_check_s
        rounds = 0
        while True:
            await trio.sleep(every)
            self.apply(handle(self.state, CustodyRound(), self.now()))
            rounds += 1
            if rounds % self.cfg.run.stale_check_rounds == 0:
                for run in self.state.runs.stale(self.name):
                    self.spawn_task(control.check_run, self, run.info.run_id)

    # -- messages -----------------------------------------------------------------------------

    def _on_message(self, link: Link, msg: m.Message) -> None:
        dispatch(self, link, msg)


__all__ = ["Peer", "PeerOptions", "PeerRun"]
