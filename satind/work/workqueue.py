"""The per-peer work queue: the owner pushes and pops the head, thieves take the tail.

The tail holds the oldest jobs, the ones highest in the tree and so the largest: stealing
them moves the most work per message (satin-grid-programming-model §4.1.2, after Cilk).
With several runs queued, thieves take them in turn: a steal passes over the oldest job when
its run had the last one taken here and another run's job is queued, so that a run submitted
while another one fills every queue is stolen at once, not once the first one ends (the papers
run one application at a time; the turn is ours).

Thread safety comes from ``collections.deque``: ``append``, ``pop`` and ``popleft`` are each
atomic under the GIL, so the compute thread (head) and the trio thread (tail) need no lock.
When one job is left, exactly one of a concurrent ``pop`` and ``popleft`` gets it and the
other sees an empty deque. The compute thread's hot path uses ``.jobs`` directly; everything
else goes through the methods.
"""

from __future__ import annotations

import itertools
from collections import deque

from satind.work.jobs import Job, is_placed

# Jobs a steal looks past for another run's when the oldest is of the run served last: with
# one run queued it costs that many at most, and another run's root is rarely further back.
TURN_LOOK = 64


class WorkQueue:
    """A double-ended queue of jobs not yet started."""

    __slots__ = ("jobs", "last_run")

    def __init__(self) -> None:
        self.jobs: deque[Job] = deque()
        # The run of the job a thief took last (thieves' side only): the next steal prefers
        # another run's.
        self.last_run = ""

    def push(self, job: Job) -> None:
        """Owner: put a job at the head (it runs next)."""
        self.jobs.append(job)

    def pop(self) -> Job | None:
        """Owner: take the newest job, or None."""
        try:
            return self.jobs.pop()
        except IndexError:
            return None

    def steal(self, run_id: str = "") -> Job | None:
        """Thief: take the oldest job a thief may have, or None: of run ``run_id`` if one is
        named (a thief whose sync waits inside a job of that run takes nothing else), and
        never one of a run whose jobs stay where their master placed them (``RunState.pushed``:
        an iterative or SPMD run's root, entity jobs and tasks). Such a job at the oldest end
        (a root waiting for its master's compute thread) must not hide the work behind it
        from thieves. O(queue length) when the oldest job is not one to take; with one
        divide-and-conquer run at a time it is a ``popleft``."""
        jobs = self.jobs
        if not run_id and self.last_run:
            # The turn: a look at the oldest job, not a pop (the owner must never find its
            # job missing for a moment), and a bounded look for another run's behind it.
            try:
                first = jobs[0]
            except IndexError:
                return None
            if first.run.run_id == self.last_run:
                other = self._take_oldest("", self.last_run, TURN_LOOK)
                if other is not None:
                    self.last_run = other.run.run_id
                    return other
        try:
            job = jobs.popleft()
        except IndexError:
            return None
        if not job.run.pushed and (not run_id or job.run.run_id == run_id):
            self.last_run = job.run.run_id
            return job
        jobs.appendleft(job)  # back where it was: still the oldest
        taken = self._take_oldest(run_id, "")
        if taken is not None:
            self.last_run = taken.run.run_id
        return taken

    def _take_oldest(self, run_id: str, not_run: str, look: int = 0) -> Job | None:
        """Thief: remove and return the oldest job a thief may have, of run ``run_id`` if
        named, of another run than ``not_run`` if named, among the ``look`` oldest (0: all);
        or None."""
        jobs = self.jobs
        # A snapshot (one C call, atomic under the GIL): the owner may push and pop its head
        # meanwhile. ``remove`` is atomic as well; a job the owner popped since is skipped.
        snapshot = list(itertools.islice(jobs, look)) if look else list(jobs)
        for candidate in snapshot:
            of = candidate.run.run_id
            if not candidate.run.pushed and (not run_id or of == run_id) and of != not_run:
                try:
                    jobs.remove(candidate)
                except ValueError:
                    continue
                return candidate
        return None

    def pop_of(self, run_id: str) -> Job | None:
        """Owner: take the newest job a frame of run ``run_id`` may start — one of that run,
        or one placed on this peer (``is_placed``) — or None. Taken when the newest job is
        another run's that the frame must not start (it would hold the frame until it
        ended); the frame's own children may be queued beneath it. O(queue length), on that
        path only; safe beside thieves as ``steal`` is."""
        jobs = self.jobs
        for candidate in reversed(list(jobs)):
            if candidate.run.run_id == run_id or is_placed(candidate):
                try:
                    jobs.remove(candidate)
                except ValueError:
                    continue  # a thief took it meanwhile
                return candidate
        return None

    def drop_run(self, run_id: str) -> int:
        """Network side: remove every queued job of a run that is over (nobody waits for
        them); returns how many. Safe beside the owner as ``steal`` is."""
        dropped = 0
        for job in list(self.jobs):
            if job.run.run_id == run_id:
                try:
                    self.jobs.remove(job)
                except ValueError:
                    continue  # the owner took it meanwhile: its frame unwinds on its own
                dropped += 1
        return dropped

    def remove(self, job: Job) -> bool:
        """Network side: take ``job`` out if it is still queued (aborted before it started).
        Safe beside the owner as ``steal`` is."""
        try:
            self.jobs.remove(job)
        except ValueError:
            return False
        return True

    def give_back(self, job: Job) -> None:
        """Thief side: return a job taken by ``steal`` that could not be sent (it stays oldest)."""
        self.jobs.appendleft(job)

    def __len__(self) -> int:
        return len(self.jobs)
