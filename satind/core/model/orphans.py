"""Orphan records (the rules: core/orphans.py): the results this peer keeps for others, the
recovery counters, and how a tuple is filed in a run's table, which the compute thread reads at
every spawn (RunState.orphans)."""

from __future__ import annotations

import sys
from collections import OrderedDict
from dataclasses import dataclass

from satind.core.model import JobKey
from satind.net import messages as m
from satind.work.jobs import RunState


@dataclass
class RecoveryCounters:
    """Counters of this peer's recovery work (names of the run JSON ``stats``)."""

    tuples_sent: int = 0
    tuples_received: int = 0
    results_reused: int = 0
    results_kept: int = 0
    # Results read from a lost member's checkpoint log (core/logged.py) and kept as orphans.
    results_from_logs: int = 0

    def as_dict(self) -> dict[str, float]:
        return {
            "tuples_sent": self.tuples_sent,
            "tuples_received": self.tuples_received,
            "results_reused": self.results_reused,
            "results_kept": self.results_kept,
            "results_from_logs": self.results_from_logs,
        }


class Orphans:
    def __init__(self, keep_results: int) -> None:
        self.keep_results = keep_results
        # Results this peer keeps for whoever asks (its orphans, and results handed over).
        self.kept: OrderedDict[JobKey, m.JobResult] = OrderedDict()
        self.counters = RecoveryCounters()

    def keep(self, result: m.JobResult) -> bool:
        """Keep a result for others; True if it is new here (then announce it)."""
        key = (result.run_id, result.path)
        if result.error is not None or result.value is None:
            return False  # an error is not worth reusing: recomputing it is the safe answer
        new = key not in self.kept
        self.kept[key] = result
        self.kept.move_to_end(key)
        while len(self.kept) > self.keep_results:
            self.kept.popitem(last=False)
        if new:
            self.counters.results_kept += 1
        return new

    def kept_result(self, key: JobKey) -> m.JobResult | None:
        return self.kept.get(key)

    @staticmethod
    def file(state: RunState, item: m.OrphanTuple) -> bool:
        """Put a tuple in a run's table (the compute thread reads it); True if it is new."""
        table = state.orphans
        if table is None:
            table = {}
        if table.get(item.path) == item.holder:
            return False
        # Interned: a table holds few distinct holders, each named by thousands of tuples
        # decoded into strings of their own (about a third of an entry's bytes otherwise).
        table[item.path] = sys.intern(item.holder)
        # The compute thread reads the table at spawns: a dict item set is atomic under the
        # GIL, and a new table is published only once it holds its first tuple.
        state.orphans = table
        return True

    @staticmethod
    def forget(state: RunState, path: bytes, holder: str) -> None:
        """A tuple led nowhere (its holder is gone, or no longer has the result): drop it, so
        that the job it names is computed instead of looked up again and again."""
        table = state.orphans
        if table is not None and table.get(path) == holder:
            del table[path]

    @staticmethod
    def forget_holder(state: RunState, holder: str) -> None:
        """A holder is gone: its tuples no longer lead to a result."""
        table = state.orphans
        if table is None:
            return
        for path in [p for p, h in table.items() if h == holder]:
            del table[path]

    @staticmethod
    def tuples_of(state: RunState, run_id: str) -> list[m.OrphanTuple]:
        table = state.orphans or {}
        return [m.OrphanTuple(run_id, path, holder) for path, holder in table.items()]

    def forget_run(self, run_id: str) -> None:
        for key in [k for k in self.kept if k[0] == run_id]:
            del self.kept[key]

    def handover(self) -> list[m.JobResult]:
        """Everything this peer keeps, for a peer that stays (a graceful leave)."""
        return list(self.kept.values())
