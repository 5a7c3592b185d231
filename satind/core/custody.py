"""Custody of jobs that travel between peers: nothing a steal hands over may be lost.

A stolen job is in the custody of two peers. The **victim** records it as given (to whom,
since when) until its result is applied; the **thief** records it as taken until it has sent
the result, and then keeps the sent result for a while. Messages can be lost (a lossy link, a
partition, a connection reset), so the victim does not trust silence: every
``steal.custody_check_s`` it asks the thief about each job given that long ago and not
returned (``JobQuery``), and the thief answers from its records (``JobState``):

* "running": the thief has it (in its queue, computing, or stolen on): keep waiting;
* the thief finished it: it sends the result again (the first one was lost);
* "unknown": the steal reply never arrived (or the thief restarted): the victim takes the
  job back and runs it itself;
* "over": the thief knows the run as ended, and says how (the run's last announcement): a
  victim that missed the end (it was paused, or cut off) learns it here and stops, instead
  of taking the job back and handing it out again forever.

A job is named by (run id, path), and the same name can be given out twice: after a master was
lost, the new epoch respawns the same paths while the old epoch's copies may still be out. A
job computes the same value whatever its epoch, so a result completes every open record of its
name, each at most once; a late or duplicated result, or a job run twice, costs work but never
correctness.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from satind.core.effects import Effects, Link, Reply, Send, ToCompute
from satind.engine.errors import exception_from
from satind.engine.frames import ChildResult
from satind.engine.jobs import Job
from satind.net import messages as m
from satind.net.codec import Encoded

if TYPE_CHECKING:
    from satind.core.state import PeerState

log = logging.getLogger(__name__)

Key = tuple[str, bytes]  # (run id, path)


@dataclass
class Given:
    job: Job
    thief: str
    # When we last heard of it (given, or the thief said it still runs it).
    heard: float
    # Linked to an orphan's kept result rather than stolen (recovery/orphans.py).
    adopted: bool = False


class Custody:
    def __init__(self, keep_results: int = 4096) -> None:
        self.given: dict[Key, list[Given]] = {}
        # Thief side: jobs taken and not finished, by (name, victim).
        self.taken: dict[tuple[Key, str], list[Job]] = {}
        # Thief side: results sent, by (name, victim), kept to send again if asked.
        self.sent: OrderedDict[tuple[Key, str], m.JobResult] = OrderedDict()
        self.keep_results = keep_results
        self.queries = 0
        self.taken_back = 0
        self.resent = 0

    # -- the victim's side -------------------------------------------------------------------

    def give(self, key: Key, job: Job, thief: str, now: float, adopted: bool = False) -> None:
        self.given.setdefault(key, []).append(Given(job, thief, now, adopted))

    def returned(self, key: Key) -> list[Given]:
        """The result for ``key`` came back: every record still open for it (empty for a
        duplicate or late result, to ignore)."""
        return self.given.pop(key, [])

    def overdue(self, now: float, after: float) -> list[tuple[Key, Given]]:
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

    def drop_given(self, matches: Callable[[Job], bool]) -> list[tuple[Key, Given]]:
        """Forget every record of a job given out that ``matches`` (aborted: nobody waits for
        it any more); returns them."""
        out: list[tuple[Key, Given]] = []
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

    def held_by(self, thief: str) -> list[Key]:
        return [key for key, gs in self.given.items() if any(g.thief == thief for g in gs)]

    def take_back_all(self, thief: str) -> list[Job]:
        """Every job given to ``thief`` (gone): the records go, the jobs come back."""
        jobs: list[Job] = []
        for key in self.held_by(thief):
            jobs.extend(self._take_back(key, thief))
        return jobs

    def _take_back(self, key: Key, thief: str) -> list[Job]:
        records = self.given.get(key, [])
        back = [g.job for g in records if g.thief == thief]
        rest = [g for g in records if g.thief != thief]
        if rest:
            self.given[key] = rest
        else:
            self.given.pop(key, None)
        return back

    # -- the thief's side --------------------------------------------------------------------

    def take(self, key: Key, victim: str, job: Job) -> None:
        self.taken.setdefault((key, victim), []).append(job)

    def finished(self, key: Key, victim: str, result: m.JobResult) -> None:
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
        recovery/drain.py): the jobs we took from it and still run are orphans. They are
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


# -- handlers ---------------------------------------------------------------------------------


def on_job_result(state: PeerState, thief: str, msg: m.JobResult) -> Effects:
    """A thief sends the result of a job it took from us: apply it once to every record
    still open for it (a late or duplicated result finds none and is ignored)."""
    from satind.core.thief import finish_unparented

    entries = state.custody.returned((msg.run_id, msg.path))
    if not entries:
        log.debug("ignoring result for %s%s from %s", msg.run_id, msg.path.hex(), thief)
        return []
    value: Any = None
    exc: BaseException | None = None
    if msg.error is not None:
        exc = exception_from(msg.error)
    elif msg.value is None:
        exc = RuntimeError(f"peer {thief} sent a result without a value or an error")
    else:
        value = Encoded(msg.value)  # decoded by the compute side, which runs plugin code
    fx: Effects = []
    for entry in entries:
        if entry.adopted:
            state.orphans.counters.results_reused += 1
        if entry.job.parent is None:
            # No local frame waits for it (a root, or work we stole and was stolen on): it
            # finishes here, so that a compute side busy in a long or stuck leaf does not
            # hold the result of another run hostage. It travels on with what its thief had
            # applied (this peer made no call for it).
            entry.job.needs = list(msg.needs)
            fx += finish_unparented(state, entry.job, value, exc)
        else:
            # Applied once the calls it needs are here too (core/sharing.py).
            fx.append(ToCompute(ChildResult(entry.job, value, exc, list(msg.needs), thief)))
    return fx


def on_job_query(state: PeerState, link: Link, msg: m.JobQuery) -> Effects:
    """A victim asks about a job it gave us: we run it, we finished it (the result again),
    we keep it as an orphan, the run is over here, or we never had it."""
    reply = state.custody.answer(msg, link.remote_name)
    if isinstance(reply, m.JobState) and reply.state == "unknown":
        kept = state.orphans.kept_result((msg.run_id, msg.path))
        end = state.runs.ended.get(msg.run_id)
        if kept is not None:
            reply = kept  # an orphan we keep: this is how its result is reused
        elif end is not None:
            reply = m.JobState(msg.run_id, msg.path, "over", end)
    return [Reply(link, reply)]


def on_job_state(state: PeerState, thief: str, msg: m.JobState, now: float) -> Effects:
    """A thief's answer about a job we gave it. "over" carries the run's end, which this
    peer missed: it applies it first (the run stops here too)."""
    from satind.core.lifecycle import on_announces
    from satind.core.spmd import is_entity_job, lost_job
    from satind.engine.frames import JobArrived
    from satind.recovery.orphans import Orphans

    fx: Effects = []
    if msg.state == "over" and msg.end is not None and msg.end.info.run_id == msg.run_id:
        fx += on_announces(state, [msg.end], now)
    for job in state.custody.on_state(msg, thief, now):
        log.info("taking back %s%s: %s does not have it", msg.run_id, msg.path.hex(), thief)
        # If its result was looked up in the orphan table, that tuple led nowhere: the job
        # is computed, not looked up again (forever).
        Orphans.forget(job.run, msg.path, thief)
        if is_entity_job(job):
            fx += lost_job(state, job)  # pinned to its holder: it cannot run here
            continue
        fx.append(ToCompute(JobArrived(job)))
    return fx


def custody_tick(state: PeerState, now: float) -> Effects:
    """Every ``steal.custody_check_s``: ask the thieves of jobs given long ago and not
    returned; a thief that is gone meanwhile gets its jobs taken back (restart)."""
    from satind.core import sharing
    from satind.recovery.restart import restart_jobs_of

    fx: Effects = sharing.tick(state, now)
    every = state.cfg.steal.custody_check_s
    gone: set[str] = set()
    for (run_id, path), given in state.custody.overdue(now, every):
        if state.table.get(given.thief) is None or state.is_gone(given.thief):
            gone.add(given.thief)  # its death reached us before the job did
            continue
        fx.append(Send(given.thief, m.JobQuery(run_id, path)))
    for thief in sorted(gone):
        fx += restart_jobs_of(state, thief, "gone")
    return fx
