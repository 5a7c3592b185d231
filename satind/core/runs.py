"""The run table: the runs one peer knows, their epochs, and the ones that ended.

Every peer keeps a ``PeerRun`` for each run it takes part in (learnt from gossip, from a
stolen job, or its own submission) with the run's compute-side state (``RunState``: its
counters, its orphan table, whether it is over here). A run has a master and an **epoch**:
when a master is lost, an elected peer respawns the root under the next epoch
(core/election.py), and a higher epoch — at the same epoch, the smaller master name —
supersedes (``supersedes``). Runs that ended are remembered by their last announcement, so
that late news of them is ignored and ``satind result`` knows whom to ask.

This module is the table and its queries only; what peers do when run news arrives is
``lifecycle.py``, what a master decides is ``master.py``.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import satind.descriptor as plugins
import satind.stats as stats
from satind.net import messages as m
from satind.work.jobs import Job, RunState

RunStatus = Literal["queued", "running", "done", "failed", "suspended", "cancelled"]
RUNNING: RunStatus = "running"
QUEUED: RunStatus = "queued"
DONE: RunStatus = "done"
FAILED: RunStatus = "failed"
# Stopped by `satind suspend` after a checkpoint; `satind resume` continues it (a new epoch).
SUSPENDED: RunStatus = "suspended"
# Stopped by `satind cancel`: dropped everywhere, never resumed.
CANCELLED: RunStatus = "cancelled"
ENDED: tuple[str, ...] = (DONE, FAILED, SUSPENDED, CANCELLED)
# Ends that are final: logged as such in checkpoints (a resume does not continue them).
FINAL: tuple[str, ...] = (DONE, FAILED, CANCELLED)


def run_state(info: m.RunInfo, plugin: str = "") -> RunState:
    """What the compute side of a peer keeps of a run described by ``info`` (``plugin``:
    its plugin's name where a loaded plugin names it)."""
    state = RunState(info.run_id, plugin or info.plugin, 1.0 / max(1, info.branching), info.epoch)
    state.weight = info.weight
    return state


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
    # This peer's steals of this run's jobs, both ways (stats.STEALS): the peer's own
    # counters grow with every run's, so their growth is no one run's figure.
    steals: dict[str, float] = field(default_factory=dict)
    # Master only.
    status: RunStatus = RUNNING
    submitter: str | None = None
    # When this peer started the run (its clock), and how long the run had gone on under
    # earlier masters by then (RunInfo.started_at): its elapsed time is both.
    started: float = 0.0
    before: float = 0.0
    root: Job | None = None
    args: Any = ()
    # Counters of members that drained and left while the run went on (their share).
    departed: dict[str, float] = field(default_factory=dict)
    # A draining master hands the run over (core/drain.py): its root subtree is being
    # cut; then to whom it went, and the paths of the results it sent along.
    cutting: bool = False
    handed_to: str | None = None
    handed: set[bytes] = field(default_factory=set)

    def elapsed(self, now: float) -> float:
        """Seconds since the run first started (master only), across masters."""
        return self.before + now - self.started


@dataclass
class Finished:
    """A result the master keeps for `satind result`."""

    result: m.RunResult
    info: m.RunInfo
    at: float
    fetched: bool = False


def supersedes(new: m.RunInfo, old: m.RunInfo) -> bool:
    """A higher epoch wins; at the same epoch (two peers took over at once, their views
    differing for a moment) the smaller master name wins."""
    if new.epoch != old.epoch:
        return new.epoch > old.epoch
    return new.master != old.master and new.master < old.master


class RunTable:
    """The runs this peer knows of, and the ones it masters."""

    def __init__(self, keep_results: int = 100, keep_results_s: float = 24 * 3600.0) -> None:
        self.keep_results = keep_results
        self.keep_results_s = keep_results_s
        self.active: dict[str, PeerRun] = {}
        # Runs this peer masters that wait for a slot (run.max_concurrent).
        self.queue: deque[PeerRun] = deque()
        # Runs other masters queue (from their "queued" announcements, arguments included):
        # if such a master is lost, the elected peer starts them (core/election.py).
        self.queued_elsewhere: dict[str, m.RunInfo] = {}
        # Runs whose master is gone in this peer's view, and since when (the election's
        # second chance waits ft.takeover_grace_s: core/election.py).
        self.orphaned_since: dict[str, float] = {}
        self.finished: OrderedDict[str, Finished] = OrderedDict()
        # Runs that ended, as their last announcement (final state, epoch, master): later
        # announcements of them are ignored, `satind result` knows whom to ask, and a peer
        # still working for one hears of its end (JobState "over").
        self.ended: OrderedDict[str, m.RunAnnounce] = OrderedDict()
        self.recently_ended: deque[m.RunAnnounce] = deque(maxlen=8)
        # Runs this peer ended as their master, by how ("runs_done", ...): node/metrics.py.
        self.ends: dict[str, int] = {}
        # Suspended runs and the epoch they were suspended at: a higher epoch resumes them.
        self.suspended: dict[str, int] = {}
        # Jobs this peer ran in runs it no longer tracks (for `satind status`), and every
        # per-run counter of those runs (for the metrics endpoint's lifetime totals).
        self.jobs_run_before = 0
        # Who submitted the runs this peer knows only from its machine's run history
        # (node/recorder.py), so that their owners may still read them (node/permissions.py).
        self.history_owners: dict[str, str] = {}
        self.counters_before: dict[str, float] = {}

    # -- queries -------------------------------------------------------------------------

    def jobs_run(self) -> int:
        return self.jobs_run_before + sum(r.state.jobs_run for r in self.active.values())

    def lifetime_counters(self) -> dict[str, float]:
        """This peer's per-run counters (stats.PER_RUN) summed over every run it took part
        in, the forgotten ones included (they only grow: Prometheus counters)."""
        return stats.total(
            [self.counters_before, *(r.state.counters() for r in self.active.values())]
        )

    def has_work(self) -> bool:
        return any(r.refused is None for r in self.active.values())

    def mastered_by(self, name: str) -> list[PeerRun]:
        return [r for r in self.active.values() if r.info.master == name]

    def master_of(self, run_id: str, me: str) -> str | None:
        run = self.active.get(run_id)
        if run is not None:
            return run.info.master
        if any(r.info.run_id == run_id for r in self.queue):
            return me
        if run_id in self.queued_elsewhere:
            return self.queued_elsewhere[run_id].master
        end = self.ended.get(run_id)
        return end.info.master if end is not None else None

    def status_of(self, run_id: str) -> str:
        run = self.active.get(run_id)
        if run is not None:
            return run.status
        if any(r.info.run_id == run_id for r in self.queue) or run_id in self.queued_elsewhere:
            return QUEUED
        end = self.ended.get(run_id)
        return end.state if end is not None else "unknown"

    def announcements(self) -> list[m.RunAnnounce]:
        """What push-pull carries: every run this peer knows to be running or queued, and the
        last few that ended (a peer that missed an end by gossip learns it here)."""
        out = [m.RunAnnounce(r.info, r.status) for r in self.active.values() if r.info.args]
        out += [m.RunAnnounce(r.info, QUEUED) for r in self.queue]
        out += [m.RunAnnounce(info, QUEUED) for info in self.queued_elsewhere.values()]
        out += list(self.recently_ended)
        return out

    def stale(self, me: str) -> list[PeerRun]:
        """Runs of other masters that this peer still tracks: one may be over without this
        peer having heard (every notice lost); ask their masters now and then."""
        return [r for r in self.active.values() if r.info.master != me]

    def orphaned(self, gone: Callable[[str], bool]) -> list[PeerRun]:
        """Running runs whose master is ``gone`` (not alive in this peer's view), that this
        peer could respawn (it has their arguments)."""
        return [
            r
            for r in self.active.values()
            if r.status == RUNNING and r.info.args and gone(r.info.master)
        ]

    # -- changes -------------------------------------------------------------------------

    def add(
        self,
        info: m.RunInfo,
        plugin: plugins.Plugin | None,
        refused: str | None,
        baseline: dict[str, float],
    ) -> PeerRun:
        run = PeerRun(info, run_state(info), plugin, refused, baseline=baseline)
        self.active[info.run_id] = run
        return run

    def remove(self, run_id: str) -> PeerRun | None:
        """Forget a run that is over here (its compute state is marked over by the caller)."""
        run = self.active.pop(run_id, None)
        if run is not None:
            self.jobs_run_before += run.state.jobs_run
            self.counters_before = stats.total([self.counters_before, run.state.counters()])
        return run

    def count_end(self, status: str) -> None:
        """A run this peer masters ended (done, failed, cancelled): the metrics count them."""
        key = f"runs_{status}"
        self.ends[key] = self.ends.get(key, 0) + 1

    def remember_ended(self, announce: m.RunAnnounce) -> None:
        run_id = announce.info.run_id
        self.ended[run_id] = announce
        self.recently_ended.append(announce)
        while len(self.ended) > 4 * self.keep_results:
            self.ended.popitem(last=False)

    def reopen(self, run_id: str) -> None:
        """A suspended run is resumed: it is no longer over."""
        self.suspended.pop(run_id, None)
        self.ended.pop(run_id, None)
        kept = [a for a in self.recently_ended if a.info.run_id != run_id]
        self.recently_ended.clear()
        self.recently_ended.extend(kept)

    def keep(self, finished: Finished, now: float) -> None:
        """Keep a finished run's result (bounded: run.keep_results, none older than
        run.keep_results_s; fetched ones go first)."""
        self.finished[finished.info.run_id] = finished
        cutoff = now - self.keep_results_s
        for run_id in [k for k, f in self.finished.items() if f.at < cutoff]:
            del self.finished[run_id]
        while len(self.finished) > self.keep_results:
            fetched = next((k for k, f in self.finished.items() if f.fetched), None)
            del self.finished[fetched if fetched is not None else next(iter(self.finished))]


class RunRefused(Exception):
    """The run cannot run on this system as it is (a member lacks the plugin's version)."""


class VersionMismatch(RunRefused):
    """Members lack the plugin or have another version of it: the operator's plugin
    directories, or the client's, need the same code (the message says which and how). Its
    own type on the wire, so that a client tells it from a refusal a retry may cure."""
