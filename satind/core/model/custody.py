"""Custody records of stolen jobs (the rules: core/custody.py): what a victim gave and to whom,
what a thief took and the results it sent, kept to send again."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from satind.core.model import JobKey
from satind.net import messages as m
from satind.work.jobs import Job


@dataclass
class Given:
    job: Job
    thief: str
    # When we last heard of it (given, or the thief said it still runs it).
    heard: float
    # Linked to an orphan's kept result rather than stolen (core/orphans.py).
    adopted: bool = False


class Custody:
    def __init__(self, keep_results: int = 4096) -> None:
        self.given: dict[JobKey, list[Given]] = {}
        # Thief side: jobs taken and not finished, by (name, victim).
        self.taken: dict[tuple[JobKey, str], list[Job]] = {}
        # Thief side: results sent, by (name, victim), kept to send again if asked.
        self.sent: OrderedDict[tuple[JobKey, str], m.JobResult] = OrderedDict()
        self.keep_results = keep_results
        self.queries = 0
        self.taken_back = 0
        self.resent = 0

    # -- the victim's side -------------------------------------------------------------------

    def give(self, key: JobKey, job: Job, thief: str, now: float, adopted: bool = False) -> None:
        self.given.setdefault(key, []).append(Given(job, thief, now, adopted))

    def returned(self, key: JobKey) -> list[Given]:
        """The result for ``key`` came back: every record still open for it (empty for a
        duplicate or late result, to ignore)."""
        return self.given.pop(key, [])

    def overdue(self, now: float, after: float) -> list[tuple[JobKey, Given]]:
        """Jobs given more than ``after`` seconds ago without news: ask their thieves."""
        late = [(key, g) for key, gs in self.given.items() for g in gs if now - g.heard >= after]
        for _, given in late:
            given.heard = now  # ask again only after another interval
        self.queries += len(late)
        return late

    def on_state(self, msg: m.JobState, thief: str, now: float) -> list[Job]:
        """The thief's answer. Returns the jobs to run here when the thief does not have them."""
        key = (msg.run_id, msg.path)
        mine = [g for g in self.given.get(key, []) if g.thief == thief]
        if msg.state == "running":
            for given in mine:
                given.heard = now
            return []
        if msg.state in ("unknown", "over") and mine:
            # "over": the thief knows the run as ended. The peer applies the end it was told
            # first (which forgets these records when the run is over here too); what is
            # still here belongs to a run that goes on here, a later epoch: run it.
            self.taken_back += len(mine)
            return self._take_back(key, thief)
        return []

    def drop_given(self, matches: Callable[[Job], bool]) -> list[tuple[JobKey, Given]]:
        """Forget every record of a job given out that ``matches`` (aborted: nobody waits for
        it any more); returns them."""
        out: list[tuple[JobKey, Given]] = []
        for key in list(self.given):
            records = self.given[key]
            gone = [g for g in records if matches(g.job)]
            if not gone:
                continue
            out.extend((key, g) for g in gone)
            rest = [g for g in records if not matches(g.job)]
            if rest:
                self.given[key] = rest
            else:
                del self.given[key]
        return out

    def held_by(self, thief: str) -> list[JobKey]:
        return [key for key, gs in self.given.items() if any(g.thief == thief for g in gs)]

    def take_back_all(self, thief: str) -> list[Job]:
        """Every job given to ``thief`` (gone): the records go, the jobs come back."""
        jobs: list[Job] = []
        for key in self.held_by(thief):
            jobs.extend(self._take_back(key, thief))
        return jobs

    def _take_back(self, key: JobKey, thief: str) -> list[Job]:
        records = self.given.get(key, [])
        back = [g.job for g in records if g.thief == thief]
        rest = [g for g in records if g.thief != thief]
        if rest:
            self.given[key] = rest
        else:
            self.given.pop(key, None)
        return back

    # -- the thief's side --------------------------------------------------------------------

    def take(self, key: JobKey, victim: str, job: Job) -> None:
        self.taken.setdefault((key, victim), []).append(job)

    def finished(self, key: JobKey, victim: str, result: m.JobResult) -> None:
        jobs = self.taken.get((key, victim))
        if jobs is not None:
            jobs.pop()
            if not jobs:
                del self.taken[(key, victim)]
        self.sent[(key, victim)] = result
        self.sent.move_to_end((key, victim))
        while len(self.sent) > self.keep_results:
            self.sent.popitem(last=False)

    def answer(self, msg: m.JobQuery, victim: str) -> m.Message:
        """What to tell a victim that asks about a job: its state, or the result again."""
        key = (msg.run_id, msg.path)
        if (key, victim) in self.taken:
            return m.JobState(msg.run_id, msg.path, "running")
        result = self.sent.get((key, victim))
        if result is not None:
            self.resent += 1
            return result
        return m.JobState(msg.run_id, msg.path, "unknown")

    def orphaned_by(self, victim: str, run_id: str | None = None) -> list[Job]:
        """``victim`` is gone (or, with ``run_id``, handed that run over as its master: see
        core/drain.py): the jobs we took from it and still run are orphans. They are
        forgotten here (asked about, they are "unknown"), and returned to be aborted."""
        keys = [
            key
            for key in self.taken
            if key[1] == victim and (run_id is None or key[0][0] == run_id)
        ]
        return [job for key in keys for job in self.taken.pop(key)]

    def sent_to(self, victim: str) -> list[m.JobResult]:
        """Results we sent to ``victim`` (gone now: they may be orphans worth keeping)."""
        return [result for (_, who), result in self.sent.items() if who == victim]

    def forget_run(self, run_id: str) -> None:
        """A run is over: its records go."""
        for key in [k for k in self.given if k[0] == run_id]:
            del self.given[key]
        for pair in [p for p in self.taken if p[0][0] == run_id]:
            del self.taken[pair]
        for pair in [p for p in self.sent if p[0][0] == run_id]:
            del self.sent[pair]
