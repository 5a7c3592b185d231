"""Everything the protocol core knows about one peer: plain data, no I/O.

A ``PeerState`` is what every core handler takes first. It holds the member table, the work
queue the compute side shares (the core takes jobs from its tail for thieves), custody, the
orphan table and kept results, the run table, and the peer's counters. Building one needs no
trio, no socket and no thread, which is what lets the tests feed the core an event and read
the effects (tests/core/).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import satind.descriptor as plugin_mod
import satind.stats as stats
from satind.adaptivity.utilization import Utilization
from satind.config import Config
from satind.core import barrier
from satind.core.effects import INFO, Note
from satind.core.model.checkpoint import CheckpointCounters
from satind.core.model.custody import Custody
from satind.core.model.iterative import Scheduling
from satind.core.model.orphans import Orphans
from satind.core.model.sharing import Sharing
from satind.core.model.spmd import Spmd
from satind.core.runs import RunTable
from satind.core.stealing import Candidates, StealCounters, candidates
from satind.membership.view import Member, MemberTable
from satind.net import messages as m
from satind.net.parties import TrafficCounters
from satind.work.jobs import Job
from satind.work.workqueue import WorkQueue


def _no_run_ids() -> str:
    raise RuntimeError("this peer state was built without run_ids: the node gives them")


# Notes kept until the node writes them (it does after every effect it applies).
MAX_NOTES = 1000


@dataclass
class PeerState:
    name: str
    cluster: str
    cfg: Config
    table: MemberTable
    plugins: dict[str, plugin_mod.Plugin]
    # Shipped code this peer has loaded (plugin/shipped.py): plugins by name, by code hash;
    # the versions being fetched; and jobs stolen for a run whose code is still coming, with
    # their victims (taken when it comes: core/shipping.py).
    shipped: dict[str, dict[str, plugin_mod.Plugin]] = field(default_factory=dict)
    # Bytes of each version loaded here: a master's scheduler of iterative runs weighs its
    # transfer to a worker that lacks it (core/iterative.py, the paper's T_prog).
    code_bytes: dict[str, int] = field(default_factory=dict)
    # The plugin versions (name, code hash) whose requirements this peer's environment lacks,
    # and which (plugin/requirements.py): it takes no part in their runs.
    unmet: dict[tuple[str, str], str] = field(default_factory=dict)
    fetching: set[str] = field(default_factory=set)
    held: dict[str, list[tuple[m.JobSpec, str]]] = field(default_factory=dict)
    queue: WorkQueue = field(default_factory=WorkQueue)
    custody: Custody = field(default_factory=Custody)
    orphans: Orphans = field(default_factory=lambda: Orphans(100_000))
    runs: RunTable = field(default_factory=RunTable)
    steal: StealCounters = field(default_factory=StealCounters)
    # The transport's counters (the node's transport updates them): per-run traffic.
    traffic: TrafficCounters = field(default_factory=TrafficCounters)
    checkpoint: CheckpointCounters = field(default_factory=CheckpointCounters)
    # Where new run ids come from: the node's clock and randomness (node/host.py
    # ``new_run_id``), or the simulator's reproducible ones. The core reads no clock.
    run_ids: Callable[[], str] = _no_run_ids
    # What to add to the node's clock (``now``, trio's) for the wall clock other peers read
    # (seconds since the epoch: RunInfo.started_at): the node's time.time() minus its clock
    # as it starts; 0 in the simulator, whose peers share its virtual clock.
    wall_offset: float = 0.0
    # Draining: no stealing, no new runs; leave once everything here is done (drain.py).
    draining: bool = False
    # The drain's deadline passed (core/drain.cut): everything this peer computed for others
    # is cut, keeping what is finished, and it leaves without waiting for thieves; the
    # victims of the jobs it had taken, by run (path of the job, victim), get what it kept.
    cut: bool = False
    cut_owners: dict[str, list[tuple[bytes, str]]] = field(default_factory=dict)
    # Members a drain request told us leave with us (a machine or a cluster drained at once):
    # never an heir, even before gossip says they drain (election.successor).
    leaving: set[str] = field(default_factory=set)
    # Reclaimed by the machine's owner (`satind reclaim`): no stealing, the compute side
    # suspended until released (node/peer.py ``reclaim``).
    reclaimed: bool = False
    # Started with --standby and not admitted yet: reclaimed until a coordinator (or an
    # operator's `satind release`) admits it (node/adapt.py).
    standby: bool = False
    # Idle and wide-area waiting time, for self-adaptivity (adaptivity/measure.py).
    utilization: Utilization = field(default_factory=Utilization)
    # Whether this peer's member view is whole (a state sync answered it, or it is the first
    # member): elections wait for it (core/election.py).
    settled: bool = False
    # A peer starts with an empty orphan table: it asks for one with its steals (§3.5).
    needs_orphans: bool = True
    # Empty tables its steals got so far (core/orphans.got_table).
    empty_tables: int = 0
    # The compute side wants work, and how many frames it has open (as of that news).
    worker_idle: bool = True
    worker_frames: int = 0
    # Stolen jobs whose victim aborted them, until the compute side has unwound them, and
    # Abort messages sent (core/aborts.py).
    cancelled: set[Job] = field(default_factory=set)
    abort_messages: int = 0
    # Shared objects (core/sharing.py): the network side's bookkeeping, and the replicas
    # this peer holds (``Sharing.replica_ids``).
    sharing: Sharing = field(default_factory=Sharing)
    # Iterative runs (core/iterative.py): a master's scheduler, and every run's last barrier.
    iterative: Scheduling = field(default_factory=Scheduling)
    # SPMD runs (core/spmd/): a master's locators, a holder's entities and their ghosts.
    spmd: Spmd = field(default_factory=Spmd)
    # Jobs a lost member took, or the new root of a run whose master was lost, waiting while
    # the checkpoint logs are read (core/logged.py), by read; and how many reads were asked.
    reading_logs: dict[int, tuple[list[Job], Job | None]] = field(default_factory=dict)
    log_reads: int = 0
    # Unfinished runs found in the checkpoint directory at start (see `satind resume`).
    checkpointed: dict[str, object] = field(default_factory=dict)
    # What the rules noted for the log, written out by the node after it applies their effects
    # (``note``); notes below ``note_level`` are not kept (the node sets it from its logging).
    notes: list[Note] = field(default_factory=list)
    note_level: int = INFO
    notes_dropped: int = 0
    _victims: tuple[int, Candidates] | None = None

    # -- notes for the log --------------------------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        if barrier.ON:  # debug only (core/barrier.py): writes only inside handle
            barrier.written(self.__dict__.get("_sealed", False), name)
        object.__setattr__(self, name, value)

    def note(self, level: int, logger: str, message: str, *args: Any) -> None:
        """Note a line for the peer's log (``%``-style ``message`` and ``args``, as logging
        takes them). Bounded: past ``MAX_NOTES`` unwritten notes, the oldest go."""
        if level < self.note_level:
            return
        self.notes.append(Note(level, logger, message, args))
        if len(self.notes) > MAX_NOTES:
            del self.notes[0]
            self.notes_dropped += 1

    # -- members -----------------------------------------------------------------------------

    def members(self) -> list[Member]:
        return self.table.alive()

    def others(self) -> list[str]:
        return [mem.name for mem in self.table.alive() if mem.name != self.name]

    def is_gone(self, name: str) -> bool:
        member = self.table.get(name)
        return member is not None and member.state.gone

    def victims(self) -> Candidates:
        """Who to steal from; recomputed only when the membership changed."""
        version = self.table.version
        if self._victims is None or self._victims[0] != version:
            members = [(mem.name, mem.cluster) for mem in self.table.alive()]
            self._victims = (version, candidates(self.name, self.cluster, members))
        return self._victims[1]

    # -- plugins and counters ----------------------------------------------------------------

    def plugin_named(self, name: str) -> plugin_mod.Plugin:
        """Raises plugin.UnknownPlugin."""
        try:
            return self.plugins[name]
        except KeyError:
            raise plugin_mod.UnknownPlugin(name, self.plugins) from None

    def plugin_version(self, name: str, code_hash: str) -> plugin_mod.Plugin | None:
        """Plugin ``name`` in version ``code_hash`` ("": any), installed or shipped here."""
        installed = self.plugins.get(name)
        if installed is not None and (not code_hash or installed.code_hash == code_hash):
            return installed
        return self.shipped.get(code_hash, {}).get(name)

    def cannot_run(self) -> list[str]:
        """The runs this peer knows but does not run: refused here (a plugin it lacks, or its
        requirements), or waiting for their shipped code (its thief asks for none of them)."""
        return [
            run_id
            for run_id, run in self.runs.active.items()
            if run.refused is not None or (run.plugin is None and run.info.shipped)
        ]

    def unmet_why(self, plugin: plugin_mod.Plugin) -> str:
        """Why this peer cannot serve ``plugin`` ("" if it can)."""
        return self.unmet.get((plugin.name, plugin.code_hash), "")

    def peer_counters(self) -> dict[str, float]:
        """This peer's counters that are not per run (stats.PER_RUN are the run's own)."""
        traffic = self.traffic
        out = self.steal.as_dict()
        out.update(self.orphans.counters.as_dict())
        out.update(self.checkpoint.as_dict())
        out["orphan_table_size"] = sum(
            len(r.state.orphans or ()) for r in self.runs.active.values()
        )
        out["abort_messages"] = self.abort_messages
        out["idle_s"] = self.utilization.idle_s
        out["wide_wait_s"] = self.utilization.wide_wait_s
        out.update(self.sharing.counters.as_dict())
        out.update(self.iterative.counters.as_dict())
        out.update(self.spmd.counters.as_dict())
        out["messages"] = traffic.messages
        out["bytes"] = traffic.bytes
        out["messages_wide"] = traffic.messages_wide
        out["bytes_wide"] = traffic.bytes_wide
        return out

    def run_counters(self, run_id: str) -> dict[str, float]:
        """This peer's share of a run's counters so far (empty if it does not know it)."""
        run = self.runs.active.get(run_id)
        if run is None:
            return {}
        out: dict[str, float] = dict(run.state.counters())
        out["peers_computed"] = 1 if out.get("jobs_run") else 0
        out.update(stats.delta(self.peer_counters(), run.baseline))
        out.update({name: run.steals.get(name, 0) for name in stats.STEALS})
        return out

    def count_steal(self, run_id: str, name: stats.Steal, by: int = 1) -> None:
        """A job of ``run_id`` stolen here (``stolen_local``, ``stolen_wide``) or given to a
        thief (``jobs_given``; ``by`` -1: the reply carrying it could not go): counted for
        this peer and for the run."""
        counters = self.steal
        if name == "stolen_local":
            counters.stolen_local += by
        elif name == "stolen_wide":
            counters.stolen_wide += by
        else:
            counters.jobs_given += by
        run = self.runs.active.get(run_id)
        if run is not None:
            run.steals[name] = run.steals.get(name, 0) + by

    def has_active_runs(self) -> bool:
        """Whether there is any work to steal for (no run, no stealing: an idle system is
        quiet)."""
        return not self.draining and not self.reclaimed and self.runs.has_work()
