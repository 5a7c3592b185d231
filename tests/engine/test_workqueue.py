"""The work queue: owner at the head, thieves at the tail, each job taken once."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

from satind.work.jobs import Job, RunState
from satind.work.workqueue import WorkQueue


def _jobs(n: int) -> list[Job]:
    run = RunState("r", "p", 0.5)
    return [Job(print, (i,), None, i, run, 1.0) for i in range(n)]


def test_owner_lifo_thief_fifo() -> None:
    q = WorkQueue()
    a, b, c = _jobs(3)
    for job in (a, b, c):
        q.push(job)
    assert q.steal() is a  # oldest
    assert q.pop() is c  # newest
    assert q.pop() is b
    assert q.pop() is None and q.steal() is None


def test_give_back_keeps_job_oldest() -> None:
    q = WorkQueue()
    a, b = _jobs(2)
    q.push(a)
    q.push(b)
    stolen = q.steal()
    assert stolen is a
    q.give_back(stolen)
    assert q.steal() is a


def test_steal_of_a_run_takes_the_oldest_job_of_that_run_only() -> None:
    q = WorkQueue()
    r1, r2 = RunState("r1", "p", 0.5), RunState("r2", "p", 0.5)
    a, b, c = (Job(print, (i,), None, i, run, 1.0) for i, run in enumerate((r1, r2, r2)))
    for job in (a, b, c):
        q.push(job)
    assert q.steal("r2") is b  # not a, the oldest of all
    assert q.steal("r3") is None
    assert q.steal() is a  # the rest in order
    assert q.steal("r2") is c and q.steal("r2") is None


def test_a_thief_passes_over_placed_jobs_and_takes_the_work_behind_them() -> None:
    # An SPMD run's root waiting at the oldest end for its master's compute thread hid the
    # divide-and-conquer work behind it: every steal found it, gave it back, and took nothing.
    q = WorkQueue()
    spmd, tree = RunState("r1", "p", 0.5), RunState("r2", "p", 0.5)
    spmd.pushed = True
    root, entity = Job(print, (0,), None, 0, spmd, 1.0), Job(print, (1,), None, 0, spmd, 0.5)
    a, b = (Job(print, (i,), None, i, tree, 0.25) for i in (2, 3))
    for job in (root, a, entity, b):
        q.push(job)
    assert q.steal() is a and q.steal("r2") is b
    assert q.steal() is None and q.steal("r1") is None
    assert len(q) == 2 and q.pop() is entity and q.pop() is root  # for their own peer


def test_concurrent_owner_and_thief_take_each_job_exactly_once() -> None:
    # Rounds of one owner and one thief racing to empty a small queue (the one-job case
    # included): every job must be taken by exactly one of them.
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for size in [1, 2, 3] * 150:
            q = WorkQueue()
            jobs = _jobs(size)
            for job in jobs:
                q.push(job)
            taken: list[Job] = []
            start = threading.Barrier(2)

            def drain(
                take: Callable[[], Job | None],
                start: threading.Barrier = start,
                taken: list[Job] = taken,
            ) -> None:
                start.wait()
                while (job := take()) is not None:
                    taken.append(job)  # list.append is atomic under the GIL

            threads = [
                threading.Thread(target=drain, args=(q.pop,)),
                threading.Thread(target=drain, args=(q.steal,)),
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=10)
            assert sorted(map(id, taken)) == sorted(map(id, jobs))
    finally:
        sys.setswitchinterval(old)


def test_thieves_take_the_queued_runs_in_turn() -> None:
    # A run submitted while another fills the queue: its root sits behind that run's jobs,
    # and the next steal takes it, not the older jobs of the run served last.
    q = WorkQueue()
    r1, r2 = RunState("r1", "p", 0.5), RunState("r2", "p", 0.5)
    a, b, c = (Job(print, (i,), None, i, r1, 1.0) for i in range(3))
    root = Job(print, (9,), None, 0, r2, 1.0)
    for job in (a, b, c, root):
        q.push(job)
    assert q.steal() is a  # the oldest: no run was served yet
    assert q.steal() is root  # r1 had the last one; r2's turn
    assert q.steal() is b  # r1's turn again, its oldest
    assert q.steal() is c  # r1 alone now: its jobs in order
    assert q.steal() is None


def test_thieves_take_runs_by_their_weights() -> None:
    # Stride scheduling: a run of weight 3 beside one of weight 1 has three steals of four.
    q = WorkQueue()
    light, heavy = RunState("light", "p", 0.5), RunState("heavy", "p", 0.5)
    heavy.weight = 3.0
    for i in range(40):
        q.push(Job(print, (i,), None, i, light, 1.0))
        q.push(Job(print, (i,), None, i, heavy, 1.0))
    taken = [q.steal() for _ in range(20)]
    runs = [job.run.run_id for job in taken if job is not None]
    assert runs.count("heavy") == 15 and runs.count("light") == 5, runs


def test_a_run_new_to_a_queue_takes_turns_not_every_steal() -> None:
    # A run that arrives after another was stolen from a hundred times starts level with it
    # (at the pass served last): the two alternate, the newcomer does not take 100 in a row.
    q = WorkQueue()
    old, new = RunState("old", "p", 0.5), RunState("new", "p", 0.5)
    for i in range(200):
        q.push(Job(print, (i,), None, i, old, 1.0))
    for _ in range(100):
        taken = q.steal()
        assert taken is not None and taken.run is old
    for i in range(50):  # at the oldest end, as a root is queued (WorkerBase.queue_root)
        q.give_back(Job(print, (i,), None, i, new, 1.0))
    runs = [job.run.run_id for job in (q.steal() for _ in range(10)) if job is not None]
    assert 4 <= runs.count("new") <= 6 and len(runs) == 10, runs
