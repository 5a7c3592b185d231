"""One peer: a trio thread that owns every socket and timer, and one compute thread.

``Peer.run`` opens the peer's one nursery: the transport, the thief and the run bookkeeping
live in it; the compute thread is started beside it and stopped when it closes. Handlers of
incoming messages are synchronous (the decisions are plain code); whatever must wait — a steal
round, gathering a run's statistics — runs as a task in the nursery.

The compute thread reaches this side only through the two hooks (``want_work``,
``job_finished``), which hop to the trio thread with ``TrioToken.run_sync_soon``.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from satind import plugin as plugins
from satind.api import lookup_spawnable, name_of
from satind.config import Config
from satind.engine.errors import error_info, exception_from
from satind.engine.jobs import Job, RunState, path_indices
from satind.engine.stealing import Candidates, candidates
from satind.engine.thief import Thief
from satind.engine.worker import ChildResult, JobArrived, Worker, make_root
from satind.membership.view import MembershipView
from satind.net import codec
from satind.net import messages as m
from satind.net.requests import Requests
from satind.net.transport import Address, Connection, Identity, TcpTransport
from satind.runs import (
    PeerRun,
    counters_delta,
    new_run_id,
    result_message,
    sum_counters,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StolenEntry:
    """A job another peer stole from this one: the record its result will complete."""

    job: Job
    thief: str


class Peer:
    """A satind peer. Create it, then ``await peer.run(...)`` inside a nursery."""

    def __init__(
        self,
        cfg: Config,
        membership: MembershipView,
        *,
        plugin_paths: Sequence[Path] = (),
        seed: int | None = None,
    ) -> None:
        self.cfg = cfg
        self.membership = membership
        me = membership.me
        self.name = me.name
        self.cluster = me.cluster
        self.plugin_paths = tuple(plugin_paths)
        self.requests = Requests()
        self.runs: dict[str, PeerRun] = {}
        # Jobs stolen from this peer, by (run id, path), until their results come back.
        self.stolen: dict[tuple[str, bytes], StolenEntry] = {}
        self.worker = Worker(cfg.engine, self)
        self.transport = TcpTransport(
            Identity(me.name, me.cluster, "peer"),
            cfg.net,
            self._on_message,
            resolve=self._resolve,
        )
        self.thief = Thief(cfg.steal, random.Random(seed), self)
        self._plugins: dict[str, plugins.Plugin] | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._stopped = trio.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------

    async def run(
        self,
        listen: Address,
        *,
        task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until ``stop``; ``started`` reports the bound address."""
        self._token = trio.lowlevel.current_trio_token()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                address = await nursery.start(self.transport.run, listen)
                await nursery.start(self.thief.run)
                self._start_compute_thread()
                assert address is not None
                task_status.started(address)
                await self._stopped.wait()
                nursery.cancel_scope.cancel()
        finally:
            self._stop_compute_thread()

    def stop(self) -> None:
        self._stopped.set()

    def _start_compute_thread(self) -> None:
        previous = threading.stack_size()
        threading.stack_size(self.cfg.engine.thread_stack_bytes)
        try:
            self._thread = threading.Thread(
                target=self.worker.run_forever, name=f"satind-compute-{self.name}", daemon=True
            )
            self._thread.start()
        finally:
            threading.stack_size(previous)

    def _stop_compute_thread(self) -> None:
        self.worker.stop()
        if self._thread is not None:
            # A job deep in a long leaf reaches no safe point; the thread is a daemon, so the
            # process can still exit.
            self._thread.join(timeout=1.0)

    # -- membership helpers ---------------------------------------------------------------

    def _resolve(self, name: str) -> Address | None:
        member = self.membership.get(name)
        return member.address if member is not None else None

    def _cluster_of(self, name: str) -> str | None:
        member = self.membership.get(name)
        return member.cluster if member is not None else None

    def others(self) -> list[str]:
        return [mem.name for mem in self.membership.alive() if mem.name != self.name]

    def victims(self) -> Candidates:
        members = [(mem.name, mem.cluster) for mem in self.membership.alive()]
        return candidates(self.name, self.cluster, members)

    def post(self, dest: str, msg: m.Message) -> None:
        self.transport.post(dest, msg)

    def has_active_runs(self) -> bool:
        return any(run.refused is None for run in self.runs.values())

    # -- hooks from the compute thread (must not block) -------------------------------------

    def want_work(self, wanted: bool) -> None:
        self._soon(self.thief.set_wanted, wanted)

    def job_finished(self, job: Job) -> None:
        self._soon(self._on_job_finished, job)

    def _soon(self, fn: Any, *args: Any) -> None:
        assert self._token is not None
        with contextlib.suppress(trio.RunFinishedError):  # shutting down
            self._token.run_sync_soon(fn, *args)

    def deliver(self, job: Job) -> None:
        self.worker.post(JobArrived(job))

    # -- plugins ----------------------------------------------------------------------------

    def plugin_named(self, name: str) -> plugins.Plugin:
        """Raises plugins.UnknownPlugin."""
        if self._plugins is None or name not in self._plugins:
            self._plugins = plugins.discover(self.plugin_paths)
        try:
            return self._plugins[name]
        except KeyError:
            raise plugins.UnknownPlugin(name, self._plugins) from None

    def _counters(self) -> dict[str, float]:
        traffic = self.transport.counters
        out = self.thief.counters.as_dict()
        out["messages"] = traffic.messages
        out["bytes"] = traffic.bytes
        out["messages_wide"] = traffic.messages_wide
        out["bytes_wide"] = traffic.bytes_wide
        return out

    def _register_run(self, info: m.RunInfo) -> PeerRun:
        run = self.runs.get(info.run_id)
        if run is not None:
            return run
        refused = None
        plugin = None
        try:
            plugin = self.plugin_named(info.plugin)
            if info.code_hash and plugin.code_hash != info.code_hash:
                refused = (
                    f"peer {self.name} has plugin {info.plugin} with code hash "
                    f"{plugin.code_hash[:12]}, the run's master {info.master} has "
                    f"{info.code_hash[:12]}"
                )
        except plugins.UnknownPlugin as exc:
            refused = f"peer {self.name}: {exc}"
        state = RunState(info.run_id, info.plugin, 1.0 / max(1, info.branching))
        run = PeerRun(info, state, plugin, refused, baseline=self._counters())
        if refused:
            log.error("refusing run %s: %s", info.run_id, refused)
        self.runs[info.run_id] = run
        self.thief.update()
        return run

    # -- message dispatch -------------------------------------------------------------------

    def _on_message(self, conn: Connection, msg: m.Message) -> None:
        sender = conn.remote_name
        if isinstance(msg, m.StealRequest):
            self._on_steal_request(sender, msg)
        elif isinstance(msg, m.StealReply):
            if not self.requests.resolve(msg.req, msg):
                self.thief.on_late_reply(msg, sender, self._cluster_of(sender) != self.cluster)
        elif isinstance(msg, m.JobResult):
            self._on_job_result(sender, msg)
        elif isinstance(msg, m.RunStart):
            self._register_run(msg.run)
        elif isinstance(msg, m.RunDone):
            self.runs.pop(msg.run_id, None)
            self.thief.update()
        elif isinstance(msg, m.RunStatsRequest):
            conn.post(m.RunStatsReply(msg.req, msg.run_id, self._run_counters(msg.run_id)))
        elif isinstance(msg, m.RunStatsReply | m.ProgressReply | m.Submitted):
            self.requests.resolve(msg.req, msg)
        elif isinstance(msg, m.Submit):
            self._on_submit(conn, msg)
        elif isinstance(msg, m.ProgressRequest):
            assert self._nursery is not None
            self._nursery.start_soon(self._answer_progress, conn, msg)
        elif isinstance(msg, m.Shutdown):
            log.info("shutdown requested by %s: %s", sender, msg.reason)
            self.stop()
        else:
            log.warning("unexpected %s from %s", type(msg).__name__, sender)

    # -- stealing: the victim's side --------------------------------------------------------

    def _on_steal_request(self, thief: str, msg: m.StealRequest) -> None:
        job = self.worker.queue.steal()
        spec = None
        if job is not None:
            run = self.runs.get(job.run.run_id)
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
                    args=codec.encode_value(job.args),
                )
            except codec.EncodeError as exc:
                # Arguments CBOR cannot carry: this job runs here, and stays the oldest.
                log.warning("cannot give away %r: %s", job, exc)
                self.worker.queue.give_back(job)
                spec = None
            else:
                self.stolen[(spec.run_id, spec.path)] = StolenEntry(job, thief)
                self.thief.counters.jobs_given += 1
        self.post(thief, m.StealReply(msg.req, spec))

    def _on_job_result(self, thief: str, msg: m.JobResult) -> None:
        entry = self.stolen.pop((msg.run_id, msg.path), None)
        if entry is None:
            # Unknown or already applied: a result is applied at most once.
            log.debug("ignoring result for %s%s from %s", msg.run_id, msg.path.hex(), thief)
            return
        if entry.thief != thief:
            log.warning("result for a job stolen by %s came from %s", entry.thief, thief)
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
        self.worker.post(ChildResult(entry.job, value, exc))

    # -- stealing: the thief's side ---------------------------------------------------------

    def accept_stolen(self, spec: m.JobSpec, victim: str) -> Job | None:
        """Build the local record of a job stolen from ``victim``; on failure report it."""
        info = m.RunInfo(
            spec.run_id, spec.plugin, spec.code_hash, [], b"", spec.master, spec.branching
        )
        run = self.runs.get(spec.run_id) or self._register_run(info)
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
        return job

    def _on_job_finished(self, job: Job) -> None:
        """Trio thread: a job without a local parent finished on our compute thread."""
        if job.origin is None:
            run = self.runs.get(job.run.run_id)
            if run is None or run.root is not job:
                log.warning("finished root of unknown run %s", job.run.run_id)
                return
            assert self._nursery is not None
            self._nursery.start_soon(self._finish_run, run)
            return
        exc = job.error
        if exc is None:
            try:
                msg = m.JobResult(job.run.run_id, job.path, codec.encode_value(job.value), None)
            except codec.EncodeError as err:
                msg = m.JobResult(job.run.run_id, job.path, None, error_info(err))
        else:
            msg = m.JobResult(job.run.run_id, job.path, None, error_info(exc))
        self.post(job.origin, msg)

    # -- runs: the master's side ------------------------------------------------------------

    def _on_submit(self, conn: Connection, msg: m.Submit) -> None:
        client = conn.remote_name
        try:
            plugin = self.plugin_named(msg.plugin)
            if msg.code_hash and msg.code_hash != plugin.code_hash:
                raise plugins.UsageError(
                    f"plugin {msg.plugin}: the client has code hash {msg.code_hash[:12]}, "
                    f"peer {self.name} has {plugin.code_hash[:12]}"
                )
            args = plugin.parse_args(msg.argv)
            encoded = codec.encode_value(args)
        except (plugins.UnknownPlugin, plugins.UsageError, codec.EncodeError) as exc:
            conn.post(m.Submitted(msg.req, "", error_info(exc)))
            return
        info = m.RunInfo(
            run_id=new_run_id(),
            plugin=plugin.name,
            code_hash=plugin.code_hash,
            argv=list(msg.argv),
            args=encoded,
            master=self.name,
            branching=plugin.branching(args),
        )
        for name in self.others():
            self.post(name, m.RunStart(info))
        run = self._register_run(info)
        run.submitter = client
        run.started = trio.current_time()
        run.root = make_root(plugin.entry.fn, args, run.state)
        conn.post(m.Submitted(msg.req, info.run_id))
        log.info("run %s: %s %s", info.run_id, plugin.name, " ".join(msg.argv))
        self.worker.post(JobArrived(run.root))

    def _run_counters(self, run_id: str) -> dict[str, int | float]:
        run = self.runs.get(run_id)
        if run is None:
            return {}
        out: dict[str, int | float] = run.state.counters()
        out.update(counters_delta(self._counters(), run.baseline))
        return out

    async def _gather(self, run_id: str, within_s: float) -> tuple[dict[str, float], int]:
        """Every member's counters for a run, summed; and how many members answered."""
        parts: list[dict[str, float]] = [dict(self._run_counters(run_id))]

        async def ask(name: str) -> None:
            req = self.requests.new()
            self.post(name, m.RunStatsRequest(req, run_id))
            reply = await self.requests.reply_within(req, within_s)
            if isinstance(reply, m.RunStatsReply):
                parts.append(dict(reply.counters))

        async with trio.open_nursery() as nursery:
            for name in self.others():
                nursery.start_soon(ask, name)
        return sum_counters(parts), len(parts)

    async def _finish_run(self, run: PeerRun) -> None:
        assert run.root is not None
        elapsed = trio.current_time() - run.started
        stats, answered = await self._gather(run.info.run_id, self.cfg.run.stats_timeout_s)
        stats.pop("progress", None)
        peers = len(self.membership.alive())
        if answered < peers:
            log.warning("run %s: %d of %d peers sent statistics", run.info.run_id, answered, peers)
        result = result_message(run, run.root, elapsed, peers, stats)
        if run.submitter is not None:
            self.post(run.submitter, result)
        for name in self.others():
            self.post(name, m.RunDone(run.info.run_id))
        self.runs.pop(run.info.run_id, None)
        self.thief.update()
        log.info("run %s finished in %.3f s", run.info.run_id, elapsed)

    async def _answer_progress(self, conn: Connection, msg: m.ProgressRequest) -> None:
        if msg.run_id not in self.runs:
            conn.post(m.ProgressReply(msg.req, msg.run_id, -1.0, {}))
            return
        stats, _ = await self._gather(msg.run_id, self.cfg.run.progress_poll_s)
        progress = float(stats.pop("progress", 0.0))
        conn.post(m.ProgressReply(msg.req, msg.run_id, min(progress, 1.0), stats))
