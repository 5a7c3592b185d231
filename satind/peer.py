"""One peer: a trio thread that owns every socket and timer, and one compute thread.

``Peer.run`` opens the peer's one nursery: the transport, the failure detector, the thief and
the run bookkeeping live in it; the compute thread is started beside it and stopped when it
closes. Handlers of incoming messages are synchronous (the decisions are plain code); whatever
must wait — a steal round, gathering statistics — runs as a task in the nursery.

The compute thread reaches this side only through the two worker hooks (``want_work``,
``job_finished``), which hop to the trio thread with ``TrioToken.run_sync_soon``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import trio

from satind import plugin as plugins
from satind.api import lookup_spawnable, name_of
from satind.config import Config
from satind.engine.custody import Custody
from satind.engine.errors import error_info, exception_from
from satind.engine.jobs import Job, RunState, path_indices
from satind.engine.stealing import Candidates, candidates
from satind.engine.thief import Thief
from satind.engine.worker import (
    ChildResult,
    Compute,
    JobArrived,
    Orphaned,
    Snapshot,
    Wakeup,
    Worker,
    WorkerHooks,
)
from satind.membership.swim import Swim
from satind.membership.view import Change, Member, MemberTable, State
from satind.net import codec, tls
from satind.net import messages as m
from satind.net.memory import MemoryNetwork
from satind.net.requests import Requests
from satind.net.transport import Address, Identity, Link, TcpTransport, TrafficCounters
from satind.recovery.checkpoint import Checkpointer, LogStore
from satind.recovery.orphans import Orphans
from satind.runs import PeerRun, RunRefused, Runs, as_ints

log = logging.getLogger(__name__)


class PeerTransport(Protocol):
    """What a peer needs of its network (TcpTransport, or the simulator's MemoryTransport)."""

    counters: TrafficCounters

    async def run(
        self, listen: Address | None = None, *, task_status: trio.TaskStatus[Address | None]
    ) -> None: ...

    def post(self, dest: str, msg: m.Message) -> bool: ...

    def post_address(self, address: Address, msg: m.Message) -> None: ...


@dataclass
class PeerOptions:
    name: str
    cluster: str = "c0"
    listen: Address = field(default_factory=lambda: Address("127.0.0.1", 0))
    seeds: Sequence[Address] = ()
    credentials: tls.Credentials | None = None
    plugin_paths: Sequence[Path] = ()
    seed: int | None = None
    # The simulator fixes what is otherwise taken from the world: the process instance (start
    # time), the plugins (else discovered), and how run ids are made (else clock + random).
    instance: int | None = None
    plugins: dict[str, plugins.Plugin] | None = None
    run_ids: Callable[[], str] | None = None
    # Where checkpoint logs go; by default files in [checkpoint] dir (the simulator shares
    # one in-memory store among its peers, as machines share a mount).
    checkpoint_store: LogStore | None = None


class Peer:
    """A satind peer: create it, then ``await peer.run()`` inside a nursery.

    By default it talks TCP/TLS and computes on a thread; the simulator passes an in-memory
    ``network`` and a ``compute`` that runs in virtual time instead. Everything else is the
    same code.
    """

    def __init__(
        self,
        cfg: Config,
        options: PeerOptions,
        *,
        network: MemoryNetwork | None = None,
        compute: Callable[[WorkerHooks], Compute] | None = None,
    ) -> None:
        self.cfg = cfg
        self.options = options
        self.name = options.name
        self.cluster = options.cluster
        self.requests = Requests()
        self.custody = Custody()
        self.orphans = Orphans(cfg.ft.keep_results)
        self.checkpointer = Checkpointer(cfg.checkpoint, options.name, options.checkpoint_store)
        # Unfinished runs found in the checkpoint directory at start (see `satind resume`).
        self.checkpointed: dict[str, m.RunInfo] = {}
        # A peer starts with an empty orphan table: it asks for one with its steals (§3.5).
        self.needs_orphans = cfg.ft.orphans
        self.worker: Compute = compute(self) if compute is not None else Worker(cfg.engine, self)
        if self.checkpointer.enabled and cfg.checkpoint.policy == "sel":
            self.worker.log_all = True
        if self.checkpointer.enabled and cfg.checkpoint.policy == "tic":
            self.checkpointer.request_snapshot = lambda: self.worker.post(Snapshot())
        identity = Identity(options.name, options.cluster, "peer")
        self.transport: PeerTransport
        if network is not None:
            self.transport = network.attach(identity, options.listen, self._on_message)
        else:
            self.transport = TcpTransport(
                identity,
                cfg.net,
                self._on_message,
                resolve=self._resolve,
                credentials=options.credentials,
                emulation=cfg.emulation,
            )
        rng = random.Random(options.seed)
        self.thief = Thief(cfg.steal, random.Random(rng.random()), self)
        self._plugins = (
            options.plugins
            if options.plugins is not None
            else plugins.discover(options.plugin_paths)
        )
        me = Member(
            options.name,
            options.listen,
            options.cluster,
            instance=options.instance if options.instance is not None else time.time_ns(),
            plugins={p.name: p.code_hash for p in self._plugins.values()},
        )
        self.table = MemberTable(me)
        self.swim = Swim(cfg.membership, self.table, self, random.Random(rng.random()))
        self.runs = Runs(cfg.run, self, options.run_ids, cfg.net.max_frame_bytes)
        self.draining = False
        self.worker_idle = True
        self.worker_frames = 0  # frames in progress on the compute side, as of worker_idle
        self._victims: tuple[int, Candidates] | None = None
        self.stopped = trio.Event()
        self.joined = trio.Event()
        self._changed = trio.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._cpu = (time.process_time(), time.monotonic(), 0.0)

    # -- lifecycle --------------------------------------------------------------------------

    async def run(
        self, join: bool = True, *, task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve until stopped; ``started`` reports the bound address once listening.

        ``join``: join through the options' seeds at once (else call ``join`` later).
        """
        self._token = trio.lowlevel.current_trio_token()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                address = await nursery.start(self.transport.run, self.options.listen)
                assert address is not None
                me = self.table.me
                self.table.set_me(
                    Member(me.name, address, me.cluster, instance=me.instance, plugins=me.plugins)
                )
                await nursery.start(self.thief.run)
                await nursery.start(self.swim.run)
                await nursery.start(self.worker.serve)
                nursery.start_soon(self._custody_loop)
                if self.checkpointer.enabled:
                    nursery.start_soon(self.checkpointer.loop)
                    nursery.start_soon(self._find_checkpointed_runs)
                task_status.started(address)
                if join:
                    self.join(self.options.seeds)
                await self.stopped.wait()
                nursery.cancel_scope.cancel()
        finally:
            self.worker.stop()

    def join(self, seeds: Sequence[Address]) -> None:
        """Join the system through ``seeds`` (none: start it); sets ``joined`` when done."""

        async def go() -> None:
            if await self.swim.join(seeds):
                self.joined.set()
            else:
                log.error("could not join through %s", ", ".join(map(str, seeds)))

        self.spawn_task(go)

    def stop(self) -> None:
        self.stopped.set()

    def leave(self) -> None:
        """Announce that we leave (not crash), then stop."""
        self.swim.leave()
        assert self._nursery is not None

        async def after_announcing() -> None:
            await trio.sleep(0.2)  # let the direct notices go out on the wire
            self.stop()

        self._nursery.start_soon(after_announcing)

    def drain(self, reason: str) -> None:
        """Stop taking work, finish what is here, then leave."""
        if self.draining:
            return
        log.info("draining: %s", reason)
        self.draining = True
        self.thief.update()
        self.swim.set_draining()
        assert self._nursery is not None
        self._nursery.start_soon(self._finish_drain)

    async def _finish_drain(self) -> None:
        # "Idle" (wanting work) is not enough: a frame may wait in a sync for children that
        # thieves still compute, and its result must reach its owner before we leave.
        # A draining master leaves when its runs are over.
        # Jobs we took and passed on to a thief (never run here, so not frames) still owe
        # their result through us: wait for custody to be empty as well.
        while not (
            self.worker_idle
            and self.worker_frames == 0
            and not self.custody.given
            and not self.worker.queue.jobs
            and not any(r.info.master == self.name for r in self.runs.active.values())
            and not self.runs.queue
        ):
            await self._changed.wait()
        log.info("drained; leaving")
        self._hand_over()
        self.leave()

    def changed(self) -> None:
        """Wake whoever waits for this peer's state (idleness, runs, members) to change."""
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for_members(self, count: int) -> None:
        """Return once at least ``count`` members (this one included) are alive."""
        while len(self.table.alive()) < count:
            await self._changed.wait()

    # -- membership ---------------------------------------------------------------------------

    def _resolve(self, name: str) -> Address | None:
        # Any member we know, whatever its state: a peer wrongly declared dead still gets its
        # messages (dropping them would lose work), and a dead one simply does not answer.
        member = self.table.get(name)
        return member.address if member is not None else None

    def members(self) -> Sequence[Member]:
        return self.table.alive()

    def others(self) -> list[str]:
        return [mem.name for mem in self.table.alive() if mem.name != self.name]

    def victims(self) -> Candidates:
        # Asked every steal round; recomputed only when the membership changed.
        version = self.table.version
        if self._victims is None or self._victims[0] != version:
            members = [(mem.name, mem.cluster) for mem in self.table.alive()]
            self._victims = (version, candidates(self.name, self.cluster, members))
        return self._victims[1]

    def post(self, dest: str, msg: m.Message) -> bool:
        return self.transport.post(dest, msg)

    def post_address(self, address: Address, msg: m.Message) -> None:
        self.transport.post_address(address, msg)

    def on_member_change(self, change: Change) -> None:
        self.changed()
        after = change.after
        if after.state.gone or change.replaced:
            self._restart_jobs_of(after.name, after.state.label)
            self._elect()

    def _elect(self) -> None:
        """A run whose master is gone gets a new one: the alive member with the smallest name
        in this peer's view (a deterministic rule: converged views agree). If views differ for
        a moment and two peers take over, the higher epoch — then the smaller name — wins."""
        alive = {mem.name for mem in self.table.alive()}
        if not alive or min(alive) != self.name:
            return
        for run in self.runs.orphaned(alive):
            self.runs.take_over(run)

    def _restart_jobs_of(self, thief: str, why: str) -> None:
        """Jobs a member stole from us are lost with it: put them back in our own queue to be
        computed again (satin-fault-tolerance §3.1). If the member was in fact alive (a false
        death) and its result comes later, custody has forgotten the job: the result is
        ignored, and the answer stays exact."""
        for job in self.custody.take_back_all(thief):
            if job.run.aborted:
                continue
            self.thief.counters.jobs_restarted += 1
            job.run.redo = [*(job.run.redo or ()), job.path]  # a new list: the worker reads it
            log.info("restarting %s%s: %s is %s", job.run.run_id, job.path.hex(), thief, why)
            self.worker.post(JobArrived(job))
        if self.cfg.ft.orphans:
            # Jobs we took from it have no parent to return to: abort their unfinished frames
            # and keep what they finished (satin-ft §3.2; worker.Orphaned).
            for job in self.custody.orphaned_by(thief):
                self.worker.post(Orphaned(job))
            # Results we sent it may never have been applied: keep them as orphans.
            for result in self.custody.sent_to(thief):
                self._keep_orphan(result)
            # And what it kept is gone with it: its tuples no longer point anywhere.
            for run in self.runs.active.values():
                Orphans.forget_holder(run.state, thief)

    # -- orphans (recovery/orphans.py) -------------------------------------------------------

    def orphan_result(self, job: Job) -> None:
        self._soon(self._on_orphan_result, job)

    def job_logged(self, job: Job) -> None:
        self._soon(self._log_job, job)

    def snapshot_taken(self) -> None:
        self._soon(self.checkpointer.snapshot_taken)

    def _log_job(self, job: Job) -> None:
        """A finished job's result goes to the log (policy "sel": every one; "tic": those a
        snapshot found)."""
        if job.error is not None or job.run.aborted:
            return
        try:
            value = codec.encode_value(job.value, self.cfg.net.max_frame_bytes)
        except codec.EncodeError:
            return
        self.checkpointer.result(m.JobResult(job.run.run_id, job.path, value, None))

    def _on_orphan_result(self, job: Job) -> None:
        """Trio thread: a finished job of an aborted orphan subtree: keep it."""
        try:
            value = codec.encode_value(job.value, self.cfg.net.max_frame_bytes)
        except codec.EncodeError:
            return  # it cannot travel: whoever needs it computes it again
        self._keep_orphan(m.JobResult(job.run.run_id, job.path, value, None))

    def _keep_orphan(self, result: m.JobResult) -> None:
        """Keep a result whose owner is gone and announce it to everyone (a tuple)."""
        run = self.runs.active.get(result.run_id)
        if run is None or not self.orphans.keep(result):
            return
        item = m.OrphanTuple(result.run_id, result.path, self.name)
        self.checkpointer.result(result)
        Orphans.file(run.state, item)
        self.swim.dissemination.add_tuple(item)
        self.orphans.counters.tuples_sent += 1

    def on_tuples(self, tuples: Sequence[m.OrphanTuple]) -> None:
        if not self.cfg.ft.orphans:
            return
        for item in tuples:
            holder = self.table.get(item.holder)
            if holder is not None and holder.state.gone:
                continue  # late gossip about a holder that is gone: it leads nowhere
            run = self.runs.active.get(item.run_id)
            if run is not None and Orphans.file(run.state, item):
                self.orphans.counters.tuples_received += 1
                self.swim.dissemination.add_tuple(item)  # spread on, like any news

    def got_orphan_table(self, tuples: list[m.OrphanTuple]) -> None:
        self.needs_orphans = False
        self.on_tuples(tuples)

    def orphan_hit(self, job: Job, holder: str) -> None:
        self._soon(self._fetch_orphan, job, holder)

    def _fetch_orphan(self, job: Job, holder: str) -> None:
        """A spawned job whose result ``holder`` keeps: record it as stolen by the holder and
        ask for the result (the custody query; "unknown" puts the job back in our queue)."""
        key = (job.run.run_id, job.path)
        member = self.table.get(holder)
        if holder != self.name and (member is None or not member.alive):
            # Its holder is gone: compute it after all (and do not look it up again).
            Orphans.forget(job.run, job.path, holder)
            self.worker.post(JobArrived(job))
            return
        if holder == self.name:
            kept = self.orphans.kept_result(key)
            if kept is not None and kept.value is not None:
                self.orphans.counters.results_reused += 1
                value = codec.decode_value(kept.value, self.cfg.net.max_depth)
                self.worker.post(ChildResult(job, value, None))
                return
            Orphans.forget(job.run, job.path, holder)
            self.worker.post(JobArrived(job))
            return
        self.custody.give(key, job, holder, trio.current_time(), adopted=True)
        self.post(holder, m.JobQuery(key[0], key[1]))

    def _hand_over(self) -> None:
        """Leaving gracefully: give the results we keep to a peer that stays (§3.3)."""
        results = self.orphans.handover()
        others = self.others()
        if results and others and self.cfg.ft.orphans:
            heir = random.Random(self.name).choice(others)
            log.info("handing %d result(s) over to %s", len(results), heir)
            # In messages that stay well inside the frame and item caps.
            budget = self.cfg.net.max_frame_bytes // 2
            batch: list[m.JobResult] = []
            size = 0
            for result in results:
                weight = len(result.value or b"") + len(result.path) + 64
                if batch and (
                    size + weight > budget or len(batch) >= self.cfg.ft.tuples_per_message
                ):
                    self.post(heir, m.HandOver(batch))
                    batch, size = [], 0
                batch.append(result)
                size += weight
            self.post(heir, m.HandOver(batch))

    def _on_hand_over(self, conn: Link, msg: m.HandOver) -> None:
        for result in msg.results:
            self._keep_orphan(result)

    def on_runs(self, runs: Sequence[m.RunAnnounce]) -> None:
        news = [a for a in runs if self.runs.on_announce(a)]
        for announce in news:
            if announce.state == "running":
                self.checkpointer.run(announce)
            elif announce.state in ("done", "failed"):
                self.checkpointer.ended(announce)
            elif announce.state == "suspended":
                self.checkpointer.flush_soon()  # what it did for the run goes to its log now
        for announce in news:
            # Run news spreads like member news: epidemically, so that one lost message
            # does not leave a peer stealing for a run that is long over.
            self.swim.dissemination.add_run(announce)
        if news:
            self.thief.update()

    def run_announcements(self) -> list[m.RunAnnounce]:
        return self.runs.announcements()

    def announce(self, announce: m.RunAnnounce) -> None:
        """Spread news of a run: gossip it, and tell every member at once (it is small)."""
        if announce.state == "running":
            self.checkpointer.run(announce)
        elif announce.state in ("done", "failed"):
            self.checkpointer.ended(announce)
        self.swim.dissemination.add_run(announce)
        # A run that starts with an orphan table (resumed from checkpoints, or respawned by a
        # new master) sends the table along: a member that steals before gossip brings the
        # tuples would compute again what is kept. Same link, so the run is known first.
        run = self.runs.active.get(announce.info.run_id)
        table = (
            []
            if run is None or announce.state != "running"
            else (Orphans.tuples_of(run.state, announce.info.run_id))
        )
        chunk = self.cfg.ft.tuples_per_message
        for name in self.others():
            self.post(name, m.Gossip(m.Broadcasts([], [announce], table[:chunk])))
            for start in range(chunk, len(table), chunk):
                self.post(name, m.Gossip(m.Broadcasts([], [], table[start : start + chunk])))

    def has_active_runs(self) -> bool:
        return not self.draining and self.runs.has_work()

    # -- hooks from the compute thread (must not block) -------------------------------------

    def want_work(self, wanted: bool, run_id: str = "") -> None:
        # The frame count is read here, on the compute side, so that it reaches the trio side
        # in order with the results of the frames that ended before (job_finished).
        self._soon(self._set_idle, wanted, self.worker.nesting, run_id)

    def _set_idle(self, idle: bool, frames: int, run_id: str = "") -> None:
        self.worker_idle = idle
        self.worker_frames = frames
        self.thief.set_wanted(idle, run_id)
        self.changed()

    def job_finished(self, job: Job) -> None:
        self._soon(self._on_job_finished, job)

    def _soon(self, fn: Any, *args: Any) -> None:
        assert self._token is not None
        with contextlib.suppress(trio.RunFinishedError):  # shutting down
            self._token.run_sync_soon(fn, *args)

    def deliver(self, job: Job) -> None:
        self.worker.post(JobArrived(job))

    def start_job(self, event: JobArrived) -> None:
        """A run's root: into the queue's oldest end at once, from this thread, not through
        the mailbox: a compute thread stuck in a long leaf drains its mailbox only when the
        leaf ends, while idle peers can steal the root from the queue now."""
        self.worker.queue.give_back(event.job)
        self.worker.post(Wakeup())

    def spawn_task(self, fn: Any, *args: Any) -> None:
        """Run ``fn(*args)`` in the peer's nursery. An exception in it is logged and costs
        that task only: a task must never take the peer down."""
        assert self._nursery is not None
        self._nursery.start_soon(self._guarded, fn, args, None)

    def spawn_answer(self, conn: Link, req: int, fn: Any, *args: Any) -> None:
        """As ``spawn_task``, for a task that answers request ``req``: if it fails, the asker
        gets an ErrorReply at once instead of waiting for its timeout."""
        assert self._nursery is not None
        self._nursery.start_soon(self._guarded, fn, args, (conn, req))

    async def _guarded(
        self, fn: Any, args: tuple[Any, ...], asker: tuple[Link, int] | None
    ) -> None:
        try:
            await fn(*args)
        except Exception as exc:
            log.error("%s failed", getattr(fn, "__qualname__", fn), exc_info=exc)
            if asker is not None:
                conn, req = asker
                conn.post(m.ErrorReply(req, error_info(exc)))

    # -- plugins and counters ---------------------------------------------------------------

    def plugin_named(self, name: str) -> plugins.Plugin:
        """Raises plugins.UnknownPlugin."""
        try:
            return self._plugins[name]
        except KeyError:
            raise plugins.UnknownPlugin(name, self._plugins) from None

    def peer_counters(self) -> dict[str, float]:
        traffic = self.transport.counters
        out = self.thief.counters.as_dict()
        out.update(self.orphans.counters.as_dict())
        out.update(self.checkpointer.counters())
        out["orphan_table_size"] = sum(
            len(r.state.orphans or ()) for r in self.runs.active.values()
        )
        out["messages"] = traffic.messages
        out["bytes"] = traffic.bytes
        out["messages_wide"] = traffic.messages_wide
        out["bytes_wide"] = traffic.bytes_wide
        return out

    # -- message dispatch -------------------------------------------------------------------

    def _on_message(self, conn: Link, msg: m.Message) -> None:
        handler = _HANDLERS.get(type(msg))
        if handler is None:
            log.warning("unexpected %s from %s", type(msg).__name__, conn.remote_name)
            return
        if conn.remote is not None and conn.remote.role == "client" and type(msg) not in _CLIENT_OK:
            log.warning("client %s may not send %s", conn.remote_name, type(msg).__name__)
            conn.close()
            return
        try:
            handler(self, conn, msg)
        except Exception as exc:
            if type(msg) not in m.REQUEST_TYPES:
                raise  # the transport closes the connection, counts and logs it
            # A request whose handler failed (a plugin's code raised, or a bug): the asker
            # hears why now. The connection stays: the fault is ours, not the asker's.
            log.error("%s from %s failed", type(msg).__name__, conn.remote_name, exc_info=exc)
            conn.post(m.ErrorReply(msg.req, error_info(exc)))  # type: ignore[attr-defined]

    # -- stealing: the victim's side --------------------------------------------------------

    def _on_steal_request(self, conn: Link, msg: m.StealRequest) -> None:
        thief = conn.remote_name
        queue = self.worker.queue
        job = queue.steal_of(msg.run) if msg.run else queue.steal()
        while job is not None and job.run.aborted:
            # A job of a run that is over here (ended, suspended, or an epoch left behind):
            # nobody waits for it. Given away, it would be run again under the run's id.
            job = queue.steal_of(msg.run) if msg.run else queue.steal()
        spec = None
        if job is not None and job.parent is not None and job.run.orphans is not None:
            holder = job.run.orphans.get(job.path)
            if holder is not None:
                self._fetch_orphan(job, holder)  # kept elsewhere: fetch it, do not give it away
                job = None
        if job is not None:
            run = self.runs.active.get(job.run.run_id)
            try:
                if run is None:
                    raise codec.EncodeError(f"run {job.run.run_id} is not known here")
                spec = m.JobSpec(
                    run_id=run.info.run_id,
                    plugin=run.info.plugin,
                    code_hash=run.info.code_hash,
                    master=run.info.master,
                    branching=run.info.branching,
                    path=job.path,
                    fn=name_of(job.fn),
                    args=codec.encode_value(job.args, self.cfg.net.max_frame_bytes),
                )
            except codec.EncodeError as exc:
                # Arguments CBOR cannot carry: this job runs here, and stays the oldest.
                log.warning("cannot give away %r: %s", job, exc)
                self.worker.queue.give_back(job)
                spec = None
        table = None
        if msg.orphans:
            # At most one message's worth: the rest reaches the joiner by gossip (a missing
            # tuple costs recomputation, never correctness).
            table = [
                t
                for r in self.runs.active.values()
                for t in Orphans.tuples_of(r.state, r.info.run_id)
            ][: self.cfg.ft.tuples_per_message]
        # Answer on the connection the request came on: it just worked, whatever the thief's
        # membership state is here.
        if not conn.post(m.StealReply(msg.req, spec, table)):
            if job is not None and spec is not None:
                self.worker.queue.give_back(job)  # the reply cannot go: the job stays here
            return
        if job is not None and spec is not None:
            self.custody.give((spec.run_id, spec.path), job, thief, trio.current_time())
            self.thief.counters.jobs_given += 1
            self.checkpointer.theft()
            log.debug("gave %s%s to %s", spec.run_id, spec.path.hex(), thief)

    def _on_steal_reply(self, conn: Link, msg: m.StealReply) -> None:
        if not self.requests.resolve(msg.req, msg):
            sender = conn.remote_name
            member = self.table.get(sender)
            wide = member is not None and member.cluster != self.cluster
            self.thief.on_late_reply(msg, sender, wide)

    def _on_job_result(self, conn: Link, msg: m.JobResult) -> None:
        thief = conn.remote_name
        entries = self.custody.returned((msg.run_id, msg.path))
        if not entries:
            # Unknown or already applied: a result is applied at most once.
            log.debug("ignoring result for %s%s from %s", msg.run_id, msg.path.hex(), thief)
            return
        log.debug("result of %s%s from %s", msg.run_id, msg.path.hex(), thief)
        value: Any = None
        exc: BaseException | None = None
        if msg.error is not None:
            exc = exception_from(msg.error)
        elif msg.value is None:
            exc = RuntimeError(f"peer {thief} sent a result without a value or an error")
        else:
            try:
                value = codec.decode_value(msg.value, self.cfg.net.max_depth)
            except codec.DecodeError as err:
                exc = err
        for entry in entries:
            if entry.adopted:
                self.orphans.counters.results_reused += 1
            if entry.job.parent is None:
                # No local frame waits for it (a root, or work we stole and was stolen on):
                # it finishes here, on the trio side, so that a compute thread busy in a long
                # or stuck leaf does not hold the result of another run hostage.
                self._finish_unparented(entry.job, value, exc)
            else:
                self.worker.post(ChildResult(entry.job, value, exc))

    def _finish_unparented(self, job: Job, value: Any, exc: BaseException | None) -> None:
        """A parentless job we gave away came back: apply its result at most once. The
        compute thread no longer holds a job once a thief took it from the queue."""
        if job.done:
            return
        if exc is not None:
            job.exc = exc
        else:
            job.value = value
        self._on_job_finished(job)

    def _on_job_query(self, conn: Link, msg: m.JobQuery) -> None:
        reply = self.custody.answer(msg, conn.remote_name)
        if isinstance(reply, m.JobState) and reply.state == "unknown":
            kept = self.orphans.kept_result((msg.run_id, msg.path))
            end = self.runs.ended.get(msg.run_id)
            if kept is not None:
                reply = kept  # an orphan we keep: this is how its result is reused
            elif end is not None:
                reply = m.JobState(msg.run_id, msg.path, "over", end)
        conn.post(reply)

    def _on_job_state(self, conn: Link, msg: m.JobState) -> None:
        if msg.state == "over" and msg.end is not None and msg.end.info.run_id == msg.run_id:
            self.on_runs([msg.end])  # the end we missed: the run stops here too
        for job in self.custody.on_state(msg, conn.remote_name, trio.current_time()):
            log.info(
                "taking back %s%s: %s does not have it",
                msg.run_id,
                msg.path.hex(),
                conn.remote_name,
            )
            self.worker.post(JobArrived(job))

    async def _custody_loop(self) -> None:
        """Ask thieves about jobs given long ago and not returned (custody.py); now and then,
        ask masters whether the runs we still track are still running."""
        every = self.cfg.steal.custody_check_s
        rounds = 0
        while True:
            await trio.sleep(every)
            for (run_id, path), given in self.custody.overdue(trio.current_time(), every):
                member = self.table.get(given.thief)
                if member is None or member.state.gone:
                    # Whoever has it is gone (its death reached us before the job did): the
                    # job comes back here.
                    self._restart_jobs_of(given.thief, "gone")
                    continue
                self.post(given.thief, m.JobQuery(run_id, path))
            rounds += 1
            if rounds % 6 == 0:
                for run in self.runs.stale():
                    self.spawn_task(self._check_run, run.info.run_id, run.info.master)

    async def _check_run(self, run_id: str, master: str) -> None:
        req = self.requests.new()
        self.post(master, m.ResultRequest(req, run_id, False))
        reply = await self.requests.reply_within(req, self.cfg.client.timeout_s)
        if isinstance(reply, m.ResultReply) and (
            reply.result is not None or reply.error.startswith("no run")
        ):
            log.info("run %s is over (its master %s says so)", run_id, master)
            self.runs.drop(run_id)
            self.thief.update()

    def run_over(self, run: RunState) -> None:
        """A run this peer took part in is over: forget its custody records, and make the
        compute side abandon its frames that still wait (a duplicate, or an orphan)."""
        self.custody.forget_run(run.run_id)
        self.orphans.forget_run(run.run_id)
        run.aborted = True
        self.worker.post(Wakeup())

    # -- stealing: the thief's side ---------------------------------------------------------

    def accept_stolen(self, spec: m.JobSpec, victim: str) -> Job | None:
        """Build the local record of a job stolen from ``victim``; on failure report it."""
        run = self.runs.active.get(spec.run_id) or self.runs.register(
            m.RunInfo(
                spec.run_id, spec.plugin, spec.code_hash, [], b"", spec.master, spec.branching
            )
        )
        if run is None:
            return None  # a job of a run that is over (its reply was late): nobody waits for it
        error: BaseException | None = None
        fn = None
        args: Any = ()
        if run.refused is not None:
            error = RuntimeError(run.refused)
        else:
            spawnable = lookup_spawnable(spec.fn)
            if spawnable is None:
                error = LookupError(
                    f"peer {self.name} has no spawnable function {spec.fn} (plugin {spec.plugin})"
                )
            else:
                fn = spawnable.fn
                try:
                    args = codec.decode_value(spec.args, self.cfg.net.max_depth)
                except codec.DecodeError as exc:
                    error = exc
                if not isinstance(args, tuple):
                    error = error or TypeError("stolen job arguments must be a tuple")
        if error is not None or fn is None:
            assert error is not None
            log.error("cannot run job stolen from %s: %s", victim, error)
            self.post(victim, m.JobResult(spec.run_id, spec.path, None, error_info(error)))
            return None
        depth = len(path_indices(spec.path))
        job = Job(fn, args, None, 0, run.state, run.state.inv_branching**depth)
        job.set_path(spec.path)
        job.origin = victim
        self.custody.take((spec.run_id, spec.path), victim, job)
        log.debug("took %s%s from %s", spec.run_id, spec.path.hex(), victim)
        return job

    def _on_job_finished(self, job: Job) -> None:
        """Trio thread: a job without a local parent finished on our compute thread."""
        if self.draining:
            self.changed()  # it may have been the last thing a drain waited for
        if job.origin is None:
            self.runs.root_finished(job)
            return
        exc = job.error
        if exc is None:
            try:
                value = codec.encode_value(job.value, self.cfg.net.max_frame_bytes)
                msg = m.JobResult(job.run.run_id, job.path, value, None)
            except codec.EncodeError as err:
                msg = m.JobResult(job.run.run_id, job.path, None, error_info(err))
        else:
            msg = m.JobResult(job.run.run_id, job.path, None, error_info(exc))
        origin = self.table.get(job.origin)
        if origin is not None and origin.state.gone and self.cfg.ft.orphans:
            # Its owner is gone: an orphan. Keep the result for whoever recomputes (§3.2).
            self._keep_orphan(msg)
            return
        self.custody.finished((job.run.run_id, job.path), job.origin, msg)
        self.checkpointer.result(msg)  # what a resume after a total loss would need
        sent = self.post(job.origin, msg)
        log.debug(
            "sent result of %s%s to %s (%s)",
            job.run.run_id,
            job.path.hex(),
            job.origin,
            "queued" if sent else "DROPPED",
        )

    # -- runs and control -------------------------------------------------------------------

    def _on_submit(self, conn: Link, msg: m.Submit) -> None:
        if self.draining:
            conn.post(
                m.Submitted(
                    msg.req,
                    "",
                    m.ErrorInfo(
                        "Draining", f"peer {self.name} is draining; submit to another peer"
                    ),
                )
            )
            return
        reply = self.runs.submit(conn.remote_name, msg)
        conn.post(self._with_contacts(reply))
        if reply.error is None:
            self.thief.update()

    def _with_contacts(self, reply: m.Submitted) -> m.Submitted:
        """A run accepted here: tell the client where else to ask for it (if we are lost,
        it follows the run to its next master through them)."""
        if reply.error is not None:
            return reply
        others = [mem for mem in self.table.alive() if mem.name != self.name]
        random.Random(reply.run_id).shuffle(others)
        contacts = [str(mem.address) for mem in others[: self.cfg.client.contacts]]
        return dataclasses.replace(reply, contacts=contacts)

    def _on_run_stats(self, conn: Link, msg: m.RunStatsRequest) -> None:
        conn.post(m.RunStatsReply(msg.req, msg.run_id, self.runs.counters_of(msg.run_id)))

    def _on_reply(self, conn: Link, msg: Any) -> None:
        self.requests.resolve(msg.req, msg)

    def _on_progress(self, conn: Link, msg: m.ProgressRequest) -> None:
        async def answer() -> None:
            if msg.run_id not in self.runs.active:
                conn.post(m.ProgressReply(msg.req, msg.run_id, -1.0, {}))
                return
            stats, _ = await self.runs.gather(msg.run_id, self.cfg.run.progress_poll_s)
            progress = float(stats.pop("progress", 0.0))
            conn.post(m.ProgressReply(msg.req, msg.run_id, min(progress, 1.0), as_ints(stats)))

        self.spawn_answer(conn, msg.req, answer)

    def _on_result_request(self, conn: Link, msg: m.ResultRequest) -> None:
        async def answer() -> None:
            result, why = await self.fetch_result(msg.run_id, msg.wait)
            conn.post(m.ResultReply(msg.req, result, why))

        self.spawn_answer(conn, msg.req, answer)

    async def _find_checkpointed_runs(self) -> None:
        """Runs the checkpoint directory could resume (listed by `status` until resumed)."""
        assert self.checkpointer.store is not None
        contents = await self.checkpointer.store.load()
        self.checkpointed = contents.unfinished()
        if self.checkpointed:
            log.warning(
                "checkpoint directory %s holds %d unfinished run(s): %s (`satind resume RUN_ID`)",
                self.checkpointer.store.where,
                len(self.checkpointed),
                ", ".join(sorted(self.checkpointed)),
            )

    def _on_resume_request(self, conn: Link, msg: m.ResumeRequest) -> None:
        async def answer() -> None:
            store = self.checkpointer.store
            if store is None:
                why = f"peer {self.name} has no checkpoint directory ([checkpoint] dir)"
                conn.post(m.Submitted(msg.req, "", m.ErrorInfo("RunRefused", why)))
                return
            contents = await store.load()
            for problem in contents.problems:
                log.warning("checkpoint: %s", problem)
            info = contents.runs.get(msg.run_id)
            if info is None:
                why = f"no checkpoint of run {msg.run_id} in {store.where}"
                conn.post(m.Submitted(msg.req, "", m.ErrorInfo("RunRefused", why)))
                return
            results = contents.results.get(msg.run_id, {})

            def preload(run: PeerRun) -> None:
                # Checkpointed results become this peer's orphans: found at spawn and used.
                for result in results.values():
                    self._keep_orphan(result)

            log.info("resuming %s: %d checkpointed result(s)", msg.run_id, len(results))
            conn.post(
                self._with_contacts(self.runs.resume(conn.remote_name, msg.req, info, preload))
            )

        self.spawn_answer(conn, msg.req, answer)

    def _on_suspend_request(self, conn: Link, msg: m.SuspendRequest) -> None:
        async def answer() -> None:
            master = self.runs.master_of(msg.run_id)
            if master is not None and master != self.name:
                # Relay to the master and its answer back.
                req = self.requests.new()
                self.post(master, m.SuspendRequest(req, msg.run_id))
                reply = await self.requests.reply_within(req, self.cfg.client.timeout_s)
                if isinstance(reply, m.ControlReply):
                    conn.post(m.ControlReply(msg.req, reply.ok, reply.message, reply.affected))
                else:
                    why = f"the master of {msg.run_id}, {master}, did not answer"
                    conn.post(m.ControlReply(msg.req, False, why))
                return
            if not self.checkpointer.enabled:
                why = (
                    f"peer {self.name} has no checkpoint directory: a suspended run is resumed "
                    "from checkpoints (start the peers with --checkpoint-dir)"
                )
                conn.post(m.ControlReply(msg.req, False, why))
                return
            try:
                self.runs.suspend(msg.run_id)
            except RunRefused as exc:
                conn.post(m.ControlReply(msg.req, False, str(exc)))
                return
            await self.checkpointer.flush()
            done = f"suspended {msg.run_id}; `satind resume {msg.run_id}` continues it"
            conn.post(m.ControlReply(msg.req, True, done, [msg.run_id]))

        self.spawn_answer(conn, msg.req, answer)

    def forward_result(self, run_id: str, dest: str) -> None:
        """Send ``dest`` the run's result once the run's master has it (see Runs._new_epoch)."""

        async def forward() -> None:
            result, why = await self.fetch_result(run_id, True)
            if result is not None:
                self.post(dest, result)
            else:
                log.warning("cannot forward the result of %s to %s: %s", run_id, dest, why)

        self.spawn_task(forward)

    async def fetch_result(self, run_id: str, wait: bool) -> tuple[m.RunResult | None, str]:
        """A run's result (or why there is none): ours if we master it, else the master's,
        relayed. When waiting, follow the run to whichever peer masters it."""
        while True:
            master = self.runs.master_of(run_id)
            if master is None or master == self.name:
                result, why = await self.runs.result_of(run_id, wait)
                if result is None and wait and why.startswith("moved"):
                    continue  # another peer took the run over meanwhile: ask it
                return result, why
            # Ask the master and relay its answer. When waiting, ask again now and then:
            # the master may be lost and another elected meanwhile.
            req = self.requests.new()
            self.post(master, m.ResultRequest(req, run_id, wait))
            # Waiting: re-ask every custody interval, so that a new master is found soon.
            within = self.cfg.steal.custody_check_s if wait else self.cfg.client.timeout_s
            reply = await self.requests.reply_within(req, within)
            if isinstance(reply, m.ResultReply) and (
                reply.result is not None or not wait or not reply.error.startswith("no run")
            ):
                return reply.result, reply.error
            if not wait:
                return None, f"master {master} did not answer"

    def _on_status(self, conn: Link, msg: m.StatusRequest) -> None:
        if not msg.deep:
            # This peer's own line first, then its view of every other member.
            view = [
                m.PeerStatus(mem.name, mem.cluster, _state_label(mem))
                for mem in self.table.everyone()
                if mem.name != self.name
            ]
            conn.post(m.StatusReply(msg.req, [self.local_status(), *view], self._local_runs()))
            return
        self.spawn_answer(conn, msg.req, self._answer_deep_status, conn, msg)

    def local_status(self) -> m.PeerStatus:
        counters = self.thief.counters
        state = self.table.me.state.label
        if self.draining and not self.table.me.state.gone:
            state = "draining"
        jobs = self.runs.jobs_run()
        return m.PeerStatus(
            name=self.name,
            cluster=self.cluster,
            state=state,
            queue=len(self.worker.queue),
            jobs_run=jobs,
            jobs_given=counters.jobs_given,
            stolen_local=counters.stolen_local,
            stolen_wide=counters.stolen_wide,
            steal_attempts_local=counters.steal_attempts_local,
            steal_attempts_wide=counters.steal_attempts_wide,
            cpu_percent=self._cpu_percent(),
            rss_mb=_rss_mb(),
            runs=len(self.runs.active),
            checkpoint_policy=self.cfg.checkpoint.policy if self.checkpointer.enabled else "",
            checkpoint_bytes=self.checkpointer.bytes_written,
            checkpoint_age_s=-1.0
            if self.checkpointer.last_at is None
            else round(trio.current_time() - self.checkpointer.last_at, 1),
        )

    def _cpu_percent(self) -> float:
        cpu, wall, last = self._cpu
        now_cpu, now_wall = time.process_time(), time.monotonic()
        if now_wall - wall >= 0.5:
            last = 100.0 * (now_cpu - cpu) / (now_wall - wall)
            self._cpu = (now_cpu, now_wall, last)
        return round(last, 1)

    def _local_runs(self) -> list[m.RunStatus]:
        """This peer's share of every active run (state "part"), plus what it masters."""
        parts = []
        for run in self.runs.active.values():
            counters = self.runs.counters_of(run.info.run_id)
            progress = float(counters.pop("progress", 0.0))
            parts.append(
                m.RunStatus(
                    run.info.run_id,
                    run.info.plugin,
                    run.info.argv,
                    run.info.master,
                    "part",
                    progress,
                    0.0,
                    counters,
                )
            )
        resumable = [
            m.RunStatus(info.run_id, info.plugin, info.argv, info.master, "checkpointed", 0.0, 0.0)
            for run_id, info in self.checkpointed.items()
            if run_id not in self.runs.active and self.runs.status_of(run_id) == "unknown"
        ]
        return parts + self.runs.statuses({}) + resumable

    async def _answer_deep_status(self, conn: Link, msg: m.StatusRequest) -> None:
        peers = [self.local_status()]
        runs = self._local_runs()

        async def ask(name: str) -> None:
            req = self.requests.new()
            self.post(name, m.StatusRequest(req, False))
            reply = await self.requests.reply_within(req, self.cfg.run.stats_timeout_s)
            if isinstance(reply, m.StatusReply) and reply.peers:
                peers.append(reply.peers[0])  # its own line; the rest is its view
                runs.extend(reply.runs)

        async with trio.open_nursery() as nursery:
            for name in self.others():
                nursery.start_soon(ask, name)
        answered = {p.name for p in peers}
        for member in self.table.everyone():
            if member.name not in answered:
                peers.append(m.PeerStatus(member.name, member.cluster, _state_label(member)))
        conn.post(m.StatusReply(msg.req, sorted(peers, key=lambda p: p.name), merge_runs(runs)))

    def _on_drain_request(self, conn: Link, msg: m.DrainRequest) -> None:
        targets = list(msg.peers)
        if msg.cluster:
            targets += [mem.name for mem in self.table.alive() if mem.cluster == msg.cluster]
        known = {mem.name for mem in self.table.alive()}
        unknown = [t for t in targets if t not in known]
        if unknown or not targets:
            what = ", ".join(unknown) if unknown else f"cluster {msg.cluster!r}"
            conn.post(m.ControlReply(msg.req, False, f"no live peer {what}; see `satind status`"))
            return
        for target in targets:
            if target == self.name:
                self.drain(f"asked by {conn.remote_name}")
            else:
                self.post(target, m.Drain(f"asked by {conn.remote_name} via {self.name}"))
        conn.post(m.ControlReply(msg.req, True, f"draining {len(targets)} peer(s)", targets))

    def _on_stop_request(self, conn: Link, msg: m.StopRequest) -> None:
        node = self.name.split("/")[0]
        targets = [
            mem.name for mem in self.table.alive() if msg.every or mem.name.split("/")[0] == node
        ]
        reason = f"stop requested by {conn.remote_name}"
        if msg.drain:
            # Graceful: each peer drains (finishes, hands its results over) and then leaves;
            # the daemon exits once all its peers are down.
            for target in targets:
                if target == self.name:
                    self.drain(reason)
                else:
                    self.post(target, m.Drain(f"{reason} via {self.name}"))
            conn.post(m.ControlReply(msg.req, True, f"draining {len(targets)} peer(s)", targets))
            return
        for target in targets:
            if target != self.name:
                self.post(target, m.Shutdown(reason))
        conn.post(m.ControlReply(msg.req, True, f"stopping {len(targets)} peer(s)", targets))
        if self.name in targets:
            self.spawn_task(self._stop_soon, reason)

    async def _stop_soon(self, reason: str) -> None:
        await trio.sleep(0.1)  # let the reply and the shutdowns go out first
        log.info("%s", reason)
        self.leave()

    def _on_shutdown(self, conn: Link, msg: m.Shutdown) -> None:
        log.info("shutdown requested by %s: %s", conn.remote_name, msg.reason)
        self.leave()

    def _on_drain(self, conn: Link, msg: m.Drain) -> None:
        self.drain(msg.reason)


def _state_label(member: Member) -> str:
    return "draining" if member.draining and member.alive else member.state.label


def merge_runs(parts: Sequence[m.RunStatus]) -> list[m.RunStatus]:
    """Sum every peer's share of each run onto the master's line for it."""
    heads: dict[str, m.RunStatus] = {}
    shares: dict[str, list[m.RunStatus]] = {}
    for status in parts:
        if status.state == "part":
            shares.setdefault(status.run_id, []).append(status)
        else:
            heads[status.run_id] = status
    out = []
    for run_id, head in heads.items():
        if head.state in ("running",) and run_id in shares:
            total: dict[str, float] = {}
            progress = 0.0
            for share in shares[run_id]:
                progress += share.progress
                for key, value in share.counters.items():
                    total[key] = total.get(key, 0) + value
            head = m.RunStatus(
                head.run_id,
                head.plugin,
                head.argv,
                head.master,
                head.state,
                min(progress, 1.0),
                head.elapsed_s,
                as_ints(total),
            )
        out.append(head)
    return sorted(out, key=lambda r: r.run_id)


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
    except (OSError, ValueError, IndexError):
        return 0.0


def _swim(method: str) -> Any:
    def handler(peer: Peer, conn: Link, msg: Any) -> None:
        getattr(peer.swim, method)(conn, msg)

    return handler


_HANDLERS: dict[type, Any] = {
    m.StealRequest: Peer._on_steal_request,
    m.StealReply: Peer._on_steal_reply,
    m.JobResult: Peer._on_job_result,
    m.JobQuery: Peer._on_job_query,
    m.JobState: Peer._on_job_state,
    m.RunStatsRequest: Peer._on_run_stats,
    m.RunStatsReply: Peer._on_reply,
    m.ProgressReply: Peer._on_reply,
    m.StatusReply: Peer._on_reply,
    m.ResultReply: Peer._on_reply,
    m.Submitted: Peer._on_reply,
    m.Submit: Peer._on_submit,
    m.ProgressRequest: Peer._on_progress,
    m.ResultRequest: Peer._on_result_request,
    m.StatusRequest: Peer._on_status,
    m.DrainRequest: Peer._on_drain_request,
    m.StopRequest: Peer._on_stop_request,
    m.Shutdown: Peer._on_shutdown,
    m.Drain: Peer._on_drain,
    m.HandOver: Peer._on_hand_over,
    m.ResumeRequest: Peer._on_resume_request,
    m.SuspendRequest: Peer._on_suspend_request,
    m.ControlReply: Peer._on_reply,
    m.ErrorReply: Peer._on_reply,
    m.Ping: _swim("on_ping"),
    m.Ack: _swim("on_ack"),
    m.Nack: _swim("on_nack"),
    m.PingReq: _swim("on_ping_req"),
    m.PushPull: _swim("on_push_pull"),
    m.Gossip: _swim("on_gossip"),
}

# What a client (not a member) may ask of a peer.
_CLIENT_OK: frozenset[type] = frozenset(
    {
        m.Submit,
        m.ResumeRequest,
        m.SuspendRequest,
        m.ProgressRequest,
        m.ResultRequest,
        m.StatusRequest,
        m.DrainRequest,
        m.StopRequest,
        m.Shutdown,
    }
)

__all__ = ["Peer", "PeerOptions", "State"]
