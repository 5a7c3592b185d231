"""The per-peer work queue: the owner pushes and pops the head, thieves take the tail.

The tail holds the oldest jobs, the ones highest in the tree and so the largest: stealing
them moves the most work per message (satin-grid-programming-model §4.1.2, after Cilk).
With several runs queued, thieves take them in turn, by weight: a steal looks at the oldest
jobs for each run's oldest, and takes the one of the run whose turn it is — the run whose
count of steals here, each counted 1/weight, is lowest (stride scheduling, Waldspurger and
Weihl 1995) — so a run submitted while another one fills every queue is stolen at once, not
once the first one ends, and a run of weight 2 is stolen from twice as often as one of weight
1 (the papers run one application at a time; the turn is ours).

Thread safety comes from ``collections.deque``: ``append``, ``pop`` and ``popleft`` are each
atomic under the GIL, so the compute thread (head) and the trio thread (tail) need no lock.
When one job is left, exactly one of a concurrent ``pop`` and ``popleft`` gets it and the
other sees an empty deque. The compute thread's hot path uses ``.jobs`` directly; everything
else goes through the methods.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable

from satind.work.jobs import Job, is_placed

# Jobs a steal looks past for another run's when the oldest is of a run that had its turn:
# with one run queued it costs that many at most, and another run's root is rarely further
# back.
TURN_LOOK = 64
# Runs whose turns a queue remembers: past it, the counts start again (every run anew).
TURN_RUNS = 256


def root_due(job: Job, clock: Callable[[], float], after_s: float) -> bool:
    """Whether ``job`` is a run's root that its master queued here (``WorkerBase.queue_root``)
    and that has waited ``after_s`` (EngineConfig.nest_roots_after_s) without being begun: no
    idle thief took it, every compute thread being busy with other runs' work. Such a root
    starts on top of the frame the master's compute thread is in, at its next job boundary
    (engine/worker.py), so that the runs share the peers. Cheap for everything else: a job
    with a parent or a run begun answers before the ``clock`` is read; a root queued elsewhere
    waited since inf."""
    if job.parent is not None:
        return False
    run = job.run
    return run.entered == 0 and not run.aborted and clock() - run.queued_at >= after_s


class WorkQueue:
    """A double-ended queue of jobs not yet started."""

    __slots__ = ("floor", "jobs", "passes")

    def __init__(self) -> None:
        self.jobs: deque[Job] = deque()
        # Thieves' side only. Per run id, its steals here so far, each counted 1/weight (its
        # "pass"): the next steal is of the run with the lowest. A run new here starts at
        # ``floor``, the pass of the run served last, so that it does not take every steal
        # until it has caught up with runs that were stolen from for hours.
        self.passes: dict[str, float] = {}
        self.floor = 0.0

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
        if not run_id:
            # The turn: a look at the oldest jobs, not a pop (the owner must never find its
            # job missing for a moment). With one run among them it is the oldest job.
            turn = self._turn()
            if turn is not None:
                return turn
        try:
            job = jobs.popleft()
        except IndexError:
            return None
        if not job.run.pushed and (not run_id or job.run.run_id == run_id):
            self._served(job)
            return job
        jobs.appendleft(job)  # back where it was: still the oldest
        taken = self._take_oldest(run_id)
        if taken is not None:
            self._served(taken)
        return taken

    def _turn(self) -> Job | None:
        """Thief: take the oldest job of the run whose turn it is among the ``TURN_LOOK``
        oldest jobs, when that is not the oldest job's run; else None (the caller takes the
        oldest as ever)."""
        jobs = self.jobs
        try:
            first = jobs[0]
        except IndexError:
            return None
        passes = self.passes
        best = first.run
        best_pass = passes.get(best.run_id, self.floor)
        chosen: Job | None = None
        # A snapshot (one C call, atomic under the GIL): the owner may push and pop its head
        # meanwhile. ``remove`` is atomic as well; a job the owner popped since is skipped.
        for candidate in list(itertools.islice(jobs, 1, TURN_LOOK)):
            run = candidate.run
            if run is best or run.pushed:
                continue
            seen = passes.get(run.run_id, self.floor)
            if seen < best_pass:
                best, best_pass, chosen = run, seen, candidate
        if chosen is None:
            return None
        try:
            jobs.remove(chosen)
        except ValueError:
            return None  # the owner took it meanwhile: the oldest, then
        self._served(chosen)
        return chosen

    def _served(self, job: Job) -> None:
        """A thief took ``job``: its run's turn is counted."""
        run = job.run
        passes = self.passes
        if len(passes) >= TURN_RUNS and run.run_id not in passes:
            passes.clear()  # runs long over: the counts start again
        start = max(passes.get(run.run_id, self.floor), self.floor)
        self.floor = start
        passes[run.run_id] = start + 1.0 / run.weight

    def _take_oldest(self, run_id: str) -> Job | None:
        """Thief: remove and return the oldest job a thief may have, of run ``run_id`` if
        named; or None."""
        jobs = self.jobs
        # A snapshot (one C call, atomic under the GIL): the owner may push and pop its head
        # meanwhile. ``remove`` is atomic as well; a job the owner popped since is skipped.
        for candidate in list(jobs):
            if not candidate.run.pushed and (not run_id or candidate.run.run_id == run_id):
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
        self.passes.pop(run_id, None)
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
