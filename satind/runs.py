"""Runs as one peer sees them: the run table, and the master's side of a run's life.

A client submits to any peer, which becomes the run's **master**: it checks that every member
has the same version of the plugin, parses the arguments, gives the run an id and announces it
by gossip (RunAnnounce), then runs the root job — or queues the run when it already masters
``run.max_concurrent`` runs. When the root finishes, the master gathers every member's counters
for the run, keeps the result (bounded) for ``satind result``, sends it to the submitter and
announces the run's end.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from satind import plugin as plugins
from satind.config import RunConfig
from satind.engine.errors import error_info
from satind.engine.jobs import Job, RunState
from satind.engine.worker import JobArrived, make_root
from satind.membership.view import Member
from satind.net import codec
from satind.net import messages as m
from satind.net.requests import Requests

log = logging.getLogger(__name__)

RUNNING, QUEUED, DONE, FAILED = "running", "queued", "done", "failed"
# Stopped by `satind suspend` after a checkpoint; `satind resume` continues it (a new epoch).
SUSPENDED = "suspended"


def new_run_id() -> str:
    """A run id: sortable by start time, unique without coordination."""
    return time.strftime("%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(3)


@dataclass
class PeerRun:
    """One run on one peer."""

    info: m.RunInfo
    state: RunState
    plugin: plugins.Plugin | None
    # Why this peer cannot run the run's jobs (unknown plugin, other code version), or None.
    refused: str | None = None
    # This peer's counters when the run started here: per-run traffic is the difference.
    baseline: dict[str, float] = field(default_factory=dict)
    # Master only.
    status: str = RUNNING
    submitter: str | None = None
    started: float = 0.0
    root: Job | None = None
    args: tuple[Any, ...] = ()


@dataclass
class Finished:
    """A result the master keeps for `satind result`."""

    result: m.RunResult
    info: m.RunInfo
    fetched: bool = False
    # trio clock, so that retention works in virtual time too
    at: float = field(default_factory=trio.current_time)


def sum_counters(parts: Sequence[dict[str, float]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for part in parts:
        for key, value in part.items():
            total[key] = total.get(key, 0) + value
    return total


def counters_delta(now: dict[str, float], baseline: dict[str, float]) -> dict[str, float]:
    return {key: value - baseline.get(key, 0) for key, value in now.items()}


def as_ints(stats: dict[str, float]) -> dict[str, int | float]:
    """Counters are sums of integers; send them as such (floats only where fractional)."""
    return {k: int(v) if float(v).is_integer() else v for k, v in stats.items()}


def plugin_mismatches(plugin: plugins.Plugin, members: Sequence[Member]) -> list[str]:
    """Why members cannot run this plugin's version: missing, or another code hash."""
    problems = []
    for member in members:
        theirs = member.plugins.get(plugin.name)
        if not member.plugins:
            continue  # no list gossiped (yet): the member itself refuses jobs it cannot run
        if theirs is None:
            problems.append(f"peer {member.name} has no plugin {plugin.name}")
        elif theirs != plugin.code_hash:
            problems.append(
                f"peer {member.name} has {plugin.name} with code hash {theirs[:12]}, "
                f"this master has {plugin.code_hash[:12]}"
            )
    return problems


class RunsHost(Protocol):
    name: str
    requests: Requests

    def post(self, dest: str, msg: m.Message) -> bool: ...

    def others(self) -> list[str]: ...

    def members(self) -> Sequence[Member]: ...

    def announce(self, announce: m.RunAnnounce) -> None: ...

    def plugin_named(self, name: str) -> plugins.Plugin: ...

    def peer_counters(self) -> dict[str, float]: ...

    def start_job(self, event: JobArrived) -> None: ...

    def spawn_task(self, fn: Any, *args: Any) -> None: ...

    def changed(self) -> None: ...

    def run_over(self, run: RunState) -> None: ...

    def forward_result(self, run_id: str, dest: str) -> None: ...


class Runs:
    """The runs this peer knows of, and the ones it masters."""

    def __init__(
        self,
        cfg: RunConfig,
        host: RunsHost,
        run_ids: Callable[[], str] | None = None,
        max_frame_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.cfg = cfg
        self.max_frame_bytes = max_frame_bytes
        self.host = host
        self.new_run_id = run_ids or new_run_id
        self.active: dict[str, PeerRun] = {}
        self.queue: deque[PeerRun] = deque()
        self.finished: OrderedDict[str, Finished] = OrderedDict()
        # Runs that ended, as their last announcement (final state, epoch, master): later
        # announcements of them are ignored, `satind result` knows whom to ask, and a peer
        # still working for one hears of its end (JobState "over").
        self.ended: OrderedDict[str, m.RunAnnounce] = OrderedDict()
        self.recently_ended: deque[m.RunAnnounce] = deque(maxlen=8)
        # Suspended runs and the epoch they were suspended at: a higher epoch resumes them.
        self.suspended: dict[str, int] = {}
        self._result_waiters: dict[str, list[trio.Event]] = {}
        # Jobs this peer ran in runs it no longer tracks (for `satind status`).
        self.jobs_run_before = 0

    def drop(self, run_id: str) -> PeerRun | None:
        run = self.active.pop(run_id, None)
        if run is not None:
            self.jobs_run_before += run.state.jobs_run
            self.host.run_over(run.state)
        return run

    def jobs_run(self) -> int:
        return self.jobs_run_before + sum(r.state.jobs_run for r in self.active.values())

    # -- the run table ---------------------------------------------------------------------------

    def register(self, info: m.RunInfo) -> PeerRun | None:
        """Know a run (from gossip, a stolen job, or our own submission). None for a run that
        already ended (a late, delayed or duplicated message about it)."""
        if info.run_id in self.ended:
            return None
        run = self.active.get(info.run_id)
        if run is not None:
            if _supersedes(info, run.info):
                return self._new_epoch(run, info)
            if not run.info.args and info.args and info.epoch == run.info.epoch:
                run.info = info  # a stolen job's stub learns the full descriptor
            return run
        refused = None
        plugin = None
        try:
            plugin = self.host.plugin_named(info.plugin)
            if info.code_hash and plugin.code_hash != info.code_hash:
                refused = (
                    f"peer {self.host.name} has plugin {info.plugin} with code hash "
                    f"{plugin.code_hash[:12]}, the run's master {info.master} has "
                    f"{info.code_hash[:12]}"
                )
        except plugins.UnknownPlugin as exc:
            refused = f"peer {self.host.name}: {exc}"
        state = RunState(info.run_id, info.plugin, 1.0 / max(1, info.branching))
        run = PeerRun(info, state, plugin, refused, baseline=self.host.peer_counters())
        if refused:
            log.error("refusing run %s: %s", info.run_id, refused)
        self.active[info.run_id] = run
        return run

    def on_announce(self, announce: m.RunAnnounce) -> bool:
        """Apply gossip about a run; True when it is news here (then it is worth spreading)."""
        run_id = announce.info.run_id
        if (
            announce.state == RUNNING
            and run_id in self.suspended
            and announce.info.epoch > self.suspended[run_id]
        ):
            self._reopen(run_id)  # resumed
        if run_id in self.ended or run_id in self.finished:
            return False
        if announce.state in (DONE, FAILED, SUSPENDED):
            run = self.active.get(run_id)
            if run is not None and run.info.epoch > announce.info.epoch:
                return False  # news of an epoch that a resume superseded
            self._remember_ended(announce)
            if announce.state == SUSPENDED:
                self.suspended[run_id] = announce.info.epoch
            if run is not None and run.info.master != self.host.name:
                self.drop(run_id)
            elif run is not None and announce.info.master != self.host.name:
                self._abdicate(run, announce)
            return True
        if announce.state == RUNNING:
            known = self.active.get(run_id)
            if known is None or _supersedes(announce.info, known.info):
                self.register(announce.info)
                return True
        return False

    # -- master election -------------------------------------------------------------------------

    def _new_epoch(self, old: PeerRun, info: m.RunInfo) -> PeerRun:
        """A new master respawned the run's root (its old master was lost). The old epoch's
        work here goes on: it ends in orphans (results whose owner, the old master, is gone),
        which the new epoch reuses (§3.4). A job computes the same value in any epoch, so
        results of either epoch complete jobs of the same path in both (custody.py)."""
        log.info(
            "run %s: epoch %d, master %s (was %s)",
            info.run_id,
            info.epoch,
            info.master,
            old.info.master,
        )
        if old.info.master == self.host.name:
            old.root = None  # a stale master: its root's result no longer counts
            # Whoever waits here for the result must ask the new master instead; the
            # submitter, who waits for the result to come, gets it from the new master
            # through us (we were wrongly taken for dead, so it still talks to us).
            for event in self._result_waiters.pop(info.run_id, []):
                event.set()
            if old.submitter is not None:
                self.host.forward_result(info.run_id, old.submitter)
                old.submitter = None
        old.info = info
        return old

    def _abdicate(self, run: PeerRun, end: m.RunAnnounce) -> None:
        """The run ended under another master while this peer still mastered an older epoch
        of it: this peer was paused or cut off long enough to be taken for dead, and a
        survivor took the run over and finished it. Drop this epoch (its frames unwind, its
        custody goes) and send the submitter, who still waits here, the new master's
        result: a stale master must neither compute on nor keep its client waiting."""
        run_id = run.info.run_id
        log.warning(
            "run %s %s under master %s (epoch %d) while this peer mastered epoch %d: "
            "dropping this epoch",
            run_id,
            end.state,
            end.info.master,
            end.info.epoch,
            run.info.epoch,
        )
        submitter, run.submitter, run.root = run.submitter, None, None
        self.drop(run_id)
        for event in self._result_waiters.pop(run_id, []):
            event.set()  # they find the run moved and ask its new master
        if submitter is not None:
            if end.state == SUSPENDED:
                error = m.ErrorInfo("RunSuspended", f"run {run_id} was suspended")
                self.host.post(submitter, m.RunResult(run_id, None, error, 0.0, 0, {}))
            else:
                self.host.forward_result(run_id, submitter)
        if self.queue:
            self._start(self.queue.popleft())
        self.host.changed()

    def orphaned(self, alive: set[str]) -> list[PeerRun]:
        """Runs whose master is no longer alive in this peer's view."""
        return [
            r
            for r in self.active.values()
            if r.info.master not in alive and r.status == RUNNING and r.info.args
        ]

    def take_over(self, run: PeerRun) -> None:
        """Become the run's master under the next epoch and respawn its root
        (satin-fault-tolerance §3.4). The arguments travel with the run's descriptor, so any
        peer that knows the run can do this."""
        plugin = run.plugin
        if plugin is None or run.refused is not None:
            log.error(
                "run %s lost its master but this peer cannot run it: %s",
                run.info.run_id,
                run.refused,
            )
            return
        info = dataclasses.replace(run.info, master=self.host.name, epoch=run.info.epoch + 1)
        log.warning(
            "run %s lost its master %s: taking over as epoch %d",
            info.run_id,
            run.info.master,
            info.epoch,
        )
        # The same run state goes on: the old epoch's work here becomes orphans to reuse.
        run.info = info
        run.args = codec.decode_value(info.args)
        run.submitter = None
        self._start(run)

    def suspend(self, run_id: str) -> None:
        """Stop a run this peer masters so that `resume` can continue it from checkpoints:
        every peer drops its frames and flushes its log; the submitter is told.

        Raises:
            RunRefused: this peer is not the master of a running run of that id.
        """
        run = self.active.get(run_id)
        if run is None or run.info.master != self.host.name or run.status != RUNNING:
            master = self.master_of(run_id)
            where = f"its master is {master}" if master else "no such run"
            raise RunRefused(f"peer {self.host.name} masters no running run {run_id} ({where})")
        elapsed = trio.current_time() - run.started
        self.drop(run_id)
        announce = m.RunAnnounce(run.info, SUSPENDED)
        self._remember_ended(announce)
        self.suspended[run_id] = run.info.epoch
        self.host.announce(announce)
        why = f"run {run_id} was suspended; `satind resume {run_id}` continues it"
        if run.submitter is not None:
            error = m.ErrorInfo("RunSuspended", why)
            peers = len(self.host.members())
            self.host.post(run.submitter, m.RunResult(run_id, None, error, elapsed, peers, {}))
        for event in self._result_waiters.pop(run_id, []):
            event.set()
        log.warning("%s", why)
        if self.queue:
            self._start(self.queue.popleft())
        self.host.changed()

    def _reopen(self, run_id: str) -> None:
        """A suspended run is resumed: it is no longer over."""
        self.suspended.pop(run_id, None)
        self.ended.pop(run_id, None)
        kept = [a for a in self.recently_ended if a.info.run_id != run_id]
        self.recently_ended.clear()
        self.recently_ended.extend(kept)

    def _remember_ended(self, announce: m.RunAnnounce) -> None:
        run_id = announce.info.run_id
        self.ended[run_id] = announce
        self.recently_ended.append(announce)
        while len(self.ended) > 4 * self.cfg.keep_results:
            self.ended.popitem(last=False)

    def announcements(self) -> list[m.RunAnnounce]:
        """What push-pull carries: every run this peer knows to be running or queued, and the
        last few that ended (a peer that missed an end by gossip learns it here)."""
        out = [m.RunAnnounce(r.info, r.status) for r in self.active.values() if r.info.args]
        out += [m.RunAnnounce(r.info, QUEUED) for r in self.queue]
        out += list(self.recently_ended)
        return out

    def stale(self) -> list[PeerRun]:
        """Runs of other masters that this peer still tracks: one may be over without this
        peer having heard (every notice lost); ask their masters now and then."""
        return [r for r in self.active.values() if r.info.master != self.host.name]

    def has_work(self) -> bool:
        return any(r.refused is None for r in self.active.values())

    def counters_of(self, run_id: str) -> dict[str, int | float]:
        run = self.active.get(run_id)
        if run is None:
            return {}
        out: dict[str, int | float] = run.state.counters()
        out.update(counters_delta(self.host.peer_counters(), run.baseline))
        return out

    # -- the master's side -----------------------------------------------------------------------

    def submit(self, client: str, msg: m.Submit) -> m.Submitted:
        """Accept (start or queue) or refuse a submission."""
        try:
            plugin = self.host.plugin_named(msg.plugin)
            if msg.code_hash and msg.code_hash != plugin.code_hash:
                raise plugins.UsageError(
                    f"plugin {msg.plugin}: the client has code hash {msg.code_hash[:12]}, "
                    f"peer {self.host.name} has {plugin.code_hash[:12]}"
                )
            args = plugin.parse_args(msg.argv)
            encoded = codec.encode_value(args)
            problems = plugin_mismatches(plugin, self.host.members())
            if problems:
                raise RunRefused("; ".join(problems))
            branching = plugin.branching(args)
        except (
            plugins.UnknownPlugin,
            plugins.UsageError,
            plugins.PluginFailed,
            codec.EncodeError,
            RunRefused,
        ) as exc:
            return m.Submitted(msg.req, "", error_info(exc))
        info = m.RunInfo(
            run_id=self.new_run_id(),
            plugin=plugin.name,
            code_hash=plugin.code_hash,
            argv=list(msg.argv),
            args=encoded,
            master=self.host.name,
            branching=branching,
        )
        run = PeerRun(info, RunState(info.run_id, plugin.name, 1.0 / info.branching), plugin)
        run.submitter = client
        run.args = args
        mastered = sum(1 for r in self.active.values() if r.info.master == self.host.name)
        if mastered >= self.cfg.max_concurrent:
            run.status = QUEUED
            self.queue.append(run)
            self.host.announce(m.RunAnnounce(info, QUEUED))
            log.info("run %s queued (%d running here)", info.run_id, mastered)
        else:
            self._start(run)
        return m.Submitted(msg.req, info.run_id)

    def resume(
        self,
        client: str,
        req: int,
        info: m.RunInfo,
        preload: Callable[[PeerRun], None],
    ) -> m.Submitted:
        """Become the master of a checkpointed run under the next epoch; ``preload`` files the
        checkpointed results as this peer's orphans before the root is respawned."""
        try:
            plugin = self.host.plugin_named(info.plugin)
            if plugin.code_hash != info.code_hash:
                raise RunRefused(
                    f"the checkpoint of {info.run_id} was written by plugin {info.plugin} with "
                    f"code hash {info.code_hash[:12]}; peer {self.host.name} has "
                    f"{plugin.code_hash[:12]}"
                )
            problems = plugin_mismatches(plugin, self.host.members())
            if problems:
                raise RunRefused("; ".join(problems))
            args = codec.decode_value(info.args)
        except (plugins.UnknownPlugin, codec.DecodeError, RunRefused) as exc:
            return m.Submitted(req, "", error_info(exc))
        if info.run_id in self.active:
            return m.Submitted(
                req, "", m.ErrorInfo("RunRefused", f"run {info.run_id} is running already")
            )
        if info.run_id in self.suspended:
            info = dataclasses.replace(info, epoch=max(info.epoch, self.suspended[info.run_id]))
            self._reopen(info.run_id)
        elif info.run_id in self.ended or info.run_id in self.finished:
            why = f"run {info.run_id} is over ({self.status_of(info.run_id)}): see `satind result`"
            return m.Submitted(req, "", m.ErrorInfo("RunRefused", why))
        info = dataclasses.replace(info, master=self.host.name, epoch=info.epoch + 1)
        run = PeerRun(info, RunState(info.run_id, plugin.name, 1.0 / info.branching), plugin)
        run.submitter = client
        run.args = args
        self.active[info.run_id] = run
        preload(run)
        log.warning("run %s: resumed from checkpoints as epoch %d", info.run_id, info.epoch)
        self._start(run)
        return m.Submitted(req, info.run_id)

    def _start(self, run: PeerRun) -> None:
        assert run.plugin is not None
        run.status = RUNNING
        run.baseline = self.host.peer_counters()
        run.started = trio.current_time()
        self.active[run.info.run_id] = run
        self.host.announce(m.RunAnnounce(run.info, RUNNING))
        run.root = make_root(run.plugin.entry.fn, run.args, run.state)
        log.info("run %s: %s %s", run.info.run_id, run.info.plugin, " ".join(run.info.argv))
        self.host.start_job(JobArrived(run.root))

    def root_finished(self, job: Job) -> None:
        run = self.active.get(job.run.run_id)
        if run is None or run.root is not job:
            log.warning("finished root of unknown run %s", job.run.run_id)
            return
        self.host.spawn_task(self._finish, run)

    async def gather(self, run_id: str, within_s: float) -> tuple[dict[str, float], int]:
        """Every member's counters for a run, summed; and how many members answered."""
        parts: list[dict[str, float]] = [dict(self.counters_of(run_id))]

        async def ask(name: str) -> None:
            req = self.host.requests.new()
            self.host.post(name, m.RunStatsRequest(req, run_id))
            reply = await self.host.requests.reply_within(req, within_s)
            if isinstance(reply, m.RunStatsReply):
                parts.append(dict(reply.counters))

        async with trio.open_nursery() as nursery:
            for name in self.host.others():
                nursery.start_soon(ask, name)
        return sum_counters(parts), len(parts)

    async def _finish(self, run: PeerRun) -> None:
        assert run.root is not None
        elapsed = trio.current_time() - run.started
        stats, answered = await self.gather(run.info.run_id, self.cfg.stats_timeout_s)
        stats.pop("progress", None)
        peers = len(self.host.members())
        if answered < peers:
            log.warning("run %s: %d of %d peers sent statistics", run.info.run_id, answered, peers)
        result = _result_message(
            run, run.root, elapsed, peers, as_ints(stats), self.max_frame_bytes
        )
        self._keep(Finished(result, run.info))
        status = DONE if result.error is None else FAILED
        self.drop(run.info.run_id)
        self._remember_ended(m.RunAnnounce(run.info, status))
        self.host.announce(m.RunAnnounce(run.info, status))
        if run.submitter is not None:
            self.host.post(run.submitter, result)
        for event in self._result_waiters.pop(run.info.run_id, []):
            event.set()
        log.info("run %s %s in %.3f s", run.info.run_id, status, elapsed)
        if self.queue:
            self._start(self.queue.popleft())
        self.host.changed()

    def _keep(self, finished: Finished) -> None:
        self.finished[finished.info.run_id] = finished
        cutoff = trio.current_time() - self.cfg.keep_results_s
        for run_id in [k for k, f in self.finished.items() if f.at < cutoff]:
            del self.finished[run_id]
        while len(self.finished) > self.cfg.keep_results:
            fetched = next((k for k, f in self.finished.items() if f.fetched), None)
            del self.finished[fetched if fetched is not None else next(iter(self.finished))]

    def master_of(self, run_id: str) -> str | None:
        run = self.active.get(run_id)
        if run is not None:
            return run.info.master
        for queued in self.queue:
            if queued.info.run_id == run_id:
                return self.host.name
        if run_id in self.ended:
            return self.ended[run_id].info.master
        return None

    async def result_of(self, run_id: str, wait: bool) -> tuple[m.RunResult | None, str]:
        """The result of a run this peer masters (or mastered): (result, why not)."""
        finished = self.finished.get(run_id)
        pending = self.status_of(run_id) in (RUNNING, QUEUED)
        if finished is None and wait and pending:
            event = trio.Event()
            self._result_waiters.setdefault(run_id, []).append(event)
            await event.wait()
            finished = self.finished.get(run_id)
        if finished is not None:
            finished.fetched = True
            return finished.result, ""
        master = self.master_of(run_id)
        if master is not None and master != self.host.name:
            return None, f"moved: run {run_id} is now mastered by {master}"
        if pending:
            return None, f"run {run_id} is still {self.status_of(run_id)}"
        if run_id in self.ended:
            return None, f"run {run_id} ended, but its result is no longer kept here"
        return None, f"no run {run_id} here"

    def status_of(self, run_id: str) -> str:
        run = self.active.get(run_id)
        if run is not None:
            return run.status
        if any(r.info.run_id == run_id for r in self.queue):
            return QUEUED
        end = self.ended.get(run_id)
        return end.state if end is not None else "unknown"

    def statuses(self, progress: dict[str, float]) -> list[m.RunStatus]:
        """Runs this peer masters (running, queued, and kept results), for `satind status`."""
        now = trio.current_time()
        out = []
        for run in self.active.values():
            if run.info.master != self.host.name:
                continue
            out.append(
                m.RunStatus(
                    run.info.run_id,
                    run.info.plugin,
                    run.info.argv,
                    run.info.master,
                    run.status,
                    progress.get(run.info.run_id, 0.0),
                    now - run.started,
                )
            )
        for run in self.queue:
            out.append(
                m.RunStatus(
                    run.info.run_id,
                    run.info.plugin,
                    run.info.argv,
                    run.info.master,
                    QUEUED,
                    0.0,
                    0.0,
                )
            )
        for run_id, finished in self.finished.items():
            state = DONE if finished.result.error is None else FAILED
            out.append(
                m.RunStatus(
                    run_id,
                    finished.info.plugin,
                    finished.info.argv,
                    finished.info.master,
                    state,
                    1.0 if state == DONE else 0.0,
                    finished.result.elapsed_s,
                    dict(finished.result.stats),
                )
            )
        return out


def _supersedes(new: m.RunInfo, old: m.RunInfo) -> bool:
    """A higher epoch wins; at the same epoch (two peers took over at once, their views
    differing for a moment) the smaller master name wins."""
    if new.epoch != old.epoch:
        return new.epoch > old.epoch
    return new.master != old.master and new.master < old.master


class RunRefused(Exception):
    """The run cannot run on this system as it is (a member lacks the plugin's version)."""


def _result_message(
    run: PeerRun,
    root: Job,
    elapsed_s: float,
    peers: int,
    stats: dict[str, int | float],
    max_frame: int,
) -> m.RunResult:
    """The RunResult for a finished root: its encoded value, or the error it raised (a value
    too large for one message is an error too)."""
    exc = root.error
    if exc is None:
        try:
            value = codec.encode_value(root.value, max_frame)
        except codec.EncodeError as err:
            return m.RunResult(run.info.run_id, None, error_info(err), elapsed_s, peers, stats)
        return m.RunResult(run.info.run_id, value, None, elapsed_s, peers, stats)
    return m.RunResult(run.info.run_id, None, error_info(exc), elapsed_s, peers, stats)
