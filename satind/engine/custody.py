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
  job back and runs it itself.

A result is applied at most once (``returned`` removes the record), so a late or duplicated
result, or a job run twice after a wrong "unknown", costs work but never correctness. A thief
that is gone for good is the fault-tolerance layer's business; custody covers live peers that
lost messages.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from satind.engine.jobs import Job
from satind.net import messages as m

Key = tuple[str, bytes]  # (run id, path)


@dataclass
class Given:
    job: Job
    thief: str
    # When we last heard of it (given, or the thief said it still runs it).
    heard: float


class Custody:
    def __init__(self, keep_results: int = 4096) -> None:
        self.given: dict[Key, Given] = {}
        # Thief side: jobs taken from a victim and not finished (by run/path, with the victim).
        self.taken: dict[Key, str] = {}
        # Thief side: results sent, kept to send again if the victim asks.
        self.sent: OrderedDict[Key, m.JobResult] = OrderedDict()
        self.keep_results = keep_results
        self.queries = 0
        self.taken_back = 0
        self.resent = 0

    # -- the victim's side -------------------------------------------------------------------

    def give(self, key: Key, job: Job, thief: str, now: float) -> None:
        self.given[key] = Given(job, thief, now)

    def returned(self, key: Key) -> Given | None:
        """The result for ``key`` came back: the record, if it was still open (else None: a
        duplicate or late result, to ignore)."""
        return self.given.pop(key, None)

    def overdue(self, now: float, after: float) -> list[tuple[Key, Given]]:
        """Jobs given more than ``after`` seconds ago without news: ask their thieves."""
        late = [(key, g) for key, g in self.given.items() if now - g.heard >= after]
        for _, given in late:
            given.heard = now  # ask again only after another interval
        self.queries += len(late)
        return late

    def on_state(self, msg: m.JobState, thief: str, now: float) -> Job | None:
        """The thief's answer. Returns the job to run here when the thief does not have it."""
        key = (msg.run_id, msg.path)
        given = self.given.get(key)
        if given is None or given.thief != thief:
            return None
        if msg.state == "running":
            given.heard = now
            return None
        if msg.state == "unknown":
            del self.given[key]
            self.taken_back += 1
            return given.job
        return None

    def held_by(self, thief: str) -> list[Key]:
        return [key for key, g in self.given.items() if g.thief == thief]

    # -- the thief's side --------------------------------------------------------------------

    def take(self, key: Key, victim: str) -> None:
        self.taken[key] = victim

    def finished(self, key: Key, result: m.JobResult) -> None:
        self.taken.pop(key, None)
        self.sent[key] = result
        self.sent.move_to_end(key)
        while len(self.sent) > self.keep_results:
            self.sent.popitem(last=False)

    def answer(self, msg: m.JobQuery, victim: str) -> m.Message:
        """What to tell a victim that asks about a job: its state, or the result again."""
        key = (msg.run_id, msg.path)
        if self.taken.get(key) == victim:
            return m.JobState(msg.run_id, msg.path, "running")
        result = self.sent.get(key)
        if result is not None:
            self.resent += 1
            return result
        return m.JobState(msg.run_id, msg.path, "unknown")

    def forget_run(self, run_id: str) -> None:
        """A run is over: its records go."""
        for table in (self.given, self.taken, self.sent):
            for key in [k for k in table if k[0] == run_id]:
                del table[key]
