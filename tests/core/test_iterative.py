"""The master's scheduler of iterative runs (core/iterative.py), case by case: who gets a task,
how many transfers at once, reclaimed workers, replicas cancelled by the first result, lost
workers' tasks placed again, a master alone, barriers, the program's transfer (shipped code)
and workers that take no part in a run."""

from __future__ import annotations

from collections import deque
from dataclasses import replace

import pytest

from satind.config import Config, IterativeConfig, PluginsConfig
from satind.core import aborts, custody, iterative, shipping
from satind.core.effects import Effect, Send, ToCompute
from satind.core.state import PeerState
from satind.engine.frames import JobArrived
from satind.membership.view import State
from satind.net import messages as m
from satind.work.jobs import Job
from satind.work.spawnables import name_of
from tests.core.support import FIB, info, job_of, known_run, make_state


def _setup(others: tuple[str, ...] = ("b/0", "c/0"), **cfg: object) -> tuple[PeerState, list[Job]]:
    state = make_state("a/0", others)
    state.cfg = replace(Config(), iterative=replace(IterativeConfig(), **cfg))  # type: ignore[arg-type]
    run = known_run(state)
    root = job_of(run.state)
    tasks = [job_of(run.state, (i,), parent=root, index=i) for i in range(4)]
    return state, tasks


def _pushes(fx: list[Effect]) -> list[tuple[str, bytes]]:
    return [
        (e.dest, e.msg.job.path)
        for e in fx
        if isinstance(e, Send) and isinstance(e.msg, m.TaskPush)
    ]


def _ready(state: PeerState, tasks: list[Job]) -> list[Effect]:
    fx: list[Effect] = []
    for job in tasks:
        fx += iterative.task_ready(state, job, 0.0)
    return fx


def test_each_free_worker_gets_a_task_and_one_more_after_its_transfer_ends() -> None:
    state, tasks = _setup(n_com=4)
    pushes = _pushes(_ready(state, tasks))
    assert sorted(to for to, _ in pushes) == ["b/0", "c/0"]  # one per worker per round
    assert all(job.run.pushed for job in tasks)  # never stolen (victim.py skips them)
    # b/0 acknowledges: it may hold one task beyond the one it computes.
    path = next(p for to, p in pushes if to == "b/0")
    more = _pushes(iterative.on_ack(state, "b/0", m.TaskAck("r1", path), 0.1))
    assert [to for to, _ in more] == ["b/0"]
    # c/0 has not acknowledged yet: its transfer still counts; b/0 holds two now.
    assert _pushes(iterative.schedule(state, 0.2)) == []


def test_at_most_n_com_transfers_at_once() -> None:
    state, tasks = _setup(n_com=1)
    pushes = _pushes(_ready(state, tasks))
    assert len(pushes) == 1
    to, path = pushes[0]
    assert len(_pushes(iterative.on_ack(state, to, m.TaskAck("r1", path), 0.1))) == 1


def test_a_reclaimed_worker_gets_nothing_and_its_availability_is_learned() -> None:
    state, tasks = _setup(n_com=4)
    known = state.table.get("c/0")
    assert known is not None
    state.table.apply(replace(known, reclaimed=True, incarnation=known.incarnation + 1).update())
    iterative.observe(state)
    assert [to for to, _ in _pushes(_ready(state, tasks))] == ["b/0"]
    for _ in range(50):
        iterative.observe(state)
    views = state.iterative.workers
    up_b = views["b/0"].estimator.chain().stationary()[0]
    up_c = views["c/0"].estimator.chain().stationary()[0]
    assert up_c < up_b


def test_replicas_for_idle_workers_and_the_first_result_cancels_them() -> None:
    state, tasks = _setup(("b/0", "c/0", "d/0"), n_com=4, replicas=2)
    pushes = _pushes(_ready(state, tasks[:1]))  # one task, three idle workers
    holders = sorted(to for to, _ in pushes)
    assert holders == ["b/0", "c/0", "d/0"]  # the task and two copies
    assert state.iterative.counters.task_replicas == 2
    key = ("r1", tasks[0].path)
    fx = iterative.finished(state, key, "c/0", 1.0)
    aborts = sorted(e.dest for e in fx if isinstance(e, Send) and isinstance(e.msg, m.Abort))
    assert aborts == ["b/0", "d/0"]
    assert key not in state.iterative.placed
    assert state.iterative.workers["c/0"].task_s == 1.0  # its speed, measured


def test_a_lost_workers_task_is_placed_again_unless_a_copy_runs() -> None:
    state, tasks = _setup(n_com=4, replicas=0)
    pushes = _pushes(_ready(state, tasks[:1]))
    to, _ = pushes[0]
    assert iterative.requeue(state, tasks[0], to)
    assert list(state.iterative.pending["r1"]) == [tasks[0]]
    assert state.iterative.counters.tasks_requeued == 1
    # With a copy elsewhere, losing one holder places nothing again.
    state2, tasks2 = _setup(("b/0", "c/0", "d/0"), n_com=4, replicas=2)
    _ready(state2, tasks2[:1])
    assert not iterative.requeue(state2, tasks2[0], "b/0")


def test_a_master_alone_computes_its_tasks() -> None:
    state, tasks = _setup(())
    fx = iterative.task_ready(state, tasks[0], 0.0)
    assert fx == [ToCompute(JobArrived(tasks[0]))]


def test_dead_workers_are_down_and_barriers_keep_the_latest() -> None:
    state, tasks = _setup(n_com=4)
    from tests.core.support import declare

    declare(state, "c/0", State.DEAD)
    iterative.observe(state)
    assert [to for to, _ in _pushes(_ready(state, tasks))] == ["b/0"]
    iterative.on_barrier(state, m.Barrier("r1", 0, 3, b"three"))
    iterative.on_barrier(state, m.Barrier("r1", 0, 2, b"two"))  # late: older
    iterative.on_barrier(state, m.Barrier("r1", 1, 1, b"epoch 1"))  # a new master's
    assert state.iterative.barriers["r1"] == (1, 1, b"epoch 1")


def test_a_task_held_only_by_a_reclaimed_worker_gets_a_copy_on_an_idle_one() -> None:
    # Two tasks on two workers, then b/0 is reclaimed and a third worker is idle: UP workers
    # (c/0, d/0) do not outnumber the tasks left (2), but b/0's task would wait for its
    # owner: it gets a copy; c/0's does not.
    state, tasks = _setup(("b/0", "c/0"), n_com=4, replicas=2)
    state.iterative.pending["r1"] = deque(tasks[:2])  # both at once: one each, no copies
    pushes = _pushes(iterative.schedule(state, 0.0))
    held = dict((to, path) for to, path in pushes)
    assert sorted(held) == ["b/0", "c/0"]
    for to, path in pushes:
        iterative.on_ack(state, to, m.TaskAck("r1", path), 0.1)
    known = state.table.get("b/0")
    assert known is not None
    state.table.apply(replace(known, reclaimed=True, incarnation=known.incarnation + 1).update())
    from tests.core.support import member

    state.table.add_known([member("d/0")])
    iterative.observe(state)
    copies = _pushes(iterative.schedule(state, 0.2))
    assert copies == [("d/0", held["b/0"])]


def test_transfer_times_are_measured_from_pushes_to_acks_and_feed_the_heuristics() -> None:
    # Issue 34, point 3: T_data from the links as measured, not one slot always.
    state, tasks = _setup(n_com=4, slot_s=0.05)
    assert iterative._transfer_slots(state) == 1.0  # nothing measured yet
    pushes = dict(_pushes(_ready(state, tasks)))  # at t = 0
    iterative.on_ack(state, "b/0", m.TaskAck("r1", pushes["b/0"]), 0.3)  # 0.3 s: 6 slots
    iterative.on_ack(state, "c/0", m.TaskAck("r1", pushes["c/0"]), 0.1)  # 2 slots
    views = state.iterative.workers
    assert views["b/0"].transfer_s == 0.3 and views["c/0"].transfer_s == 0.1
    assert iterative._transfer_slots(state) == 4.0  # their mean, in slots
    # The task computes from its arrival: its task time does not count the transfer.
    iterative.finished(state, ("r1", pushes["b/0"]), "b/0", 1.3)
    assert views["b/0"].task_s == 1.0
    # An ack of a task that was not in transfer (a late duplicate) measures nothing.
    iterative.on_ack(state, "c/0", m.TaskAck("r1", pushes["c/0"]), 5.0)
    assert views["c/0"].transfer_s == 0.1
    # A moving average: the link got faster.
    views["c/0"].holding[("r1", b"x")] = 6.0
    views["c/0"].in_transfer.add(("r1", b"x"))
    iterative.on_ack(state, "c/0", m.TaskAck("r1", b"x"), 6.02)
    assert views["c/0"].transfer_s == pytest.approx(0.1 + 0.25 * (0.02 - 0.1))


def _shipped_setup() -> tuple[PeerState, list[Job], str]:
    """A run of shipped code (5 MB) on a master whose links from b/0 and c/0 were measured:
    b/0's fast (1 GB/s), c/0's slow (1 MB/s)."""
    state = make_state("a/0", ("b/0", "c/0"))
    state.cfg = replace(Config(), iterative=replace(IterativeConfig(), slot_s=0.05))
    code = "c0de"
    state.shipped[code] = {"fib": FIB}
    state.code_bytes[code] = 5_000_000
    state.table.bandwidth.update({"b/0": 1e9, "c/0": 1e6})
    run = known_run(state, replace(info(), code_hash=code, shipped=True))
    root = job_of(run.state)
    return state, [job_of(run.state, (i,), parent=root, index=i) for i in range(4)], code


def test_a_worker_without_the_shipped_code_is_delayed_by_its_transfer_until_it_has_it() -> None:
    # Issue 34, point 3: the paper's program transfer (T_prog) on daemons: a run's shipped
    # code is fetched by a worker before it computes; the heuristics see it in its Delay.
    state, tasks, code = _shipped_setup()
    assert iterative.schedule(state, 0.0) == []  # (it learns of the workers)
    delay = {n: iterative._candidate(state, 0, n, 0.0, code).delay for n in ("b/0", "c/0")}
    assert delay["b/0"] == pytest.approx(5e6 / 1e9 / 0.05)  # 0.1 slot
    assert delay["c/0"] == pytest.approx(5e6 / 1e6 / 0.05)  # 100 slots
    # An installed plugin (no code to ship): no transfer.
    assert iterative._candidate(state, 0, "c/0", 0.0, "").delay == 0.0
    state.iterative.pending["r1"] = deque(tasks)  # all at once: no replicas
    pushes = dict(_pushes(iterative.schedule(state, 0.0)))
    # The heuristic (EMCT) sees that c/0 would start in 5 s: the first task goes to b/0.
    assert list(pushes) == ["b/0"]
    pushes.update(_pushes(iterative._push(state, tasks[3], "c/0", 0.0)))
    # c/0's task came before the code: the task waits for it there (core/shipping.py). The
    # fetch is under way (no transfer added to the Delay: the task's time covers it), and
    # the transfer goes on (the program, then the data, on one channel: §6.1).
    key = ("r1", pushes["c/0"])
    iterative.on_ack(state, "c/0", m.TaskAck(*key, has_code=False), 0.1)
    view = state.iterative.workers["c/0"]
    assert code not in view.programs and view.fetching == {key} and key in view.in_transfer
    assert iterative._candidate(state, 0, "c/0", 0.1, code).delay < 100
    assert _pushes(iterative.schedule(state, 0.2)) == []  # c/0 is still receiving
    # The code came: the worker says so, the program's transfer is over, the task computes.
    iterative.on_ack(state, "c/0", m.TaskAck(*key, has_code=True), 5.1)
    assert code in view.programs and not view.fetching and key not in view.in_transfer
    assert state.iterative.counters.program_transfers == 1
    # Its time counts from the code's arrival: c/0's speed, not the fetch.
    iterative.finished(state, key, "c/0", 5.6)
    assert view.task_s == pytest.approx(0.5)
    assert iterative._candidate(state, 0, "c/0", 5.6, code).delay == 0.0
    # b/0 had it when its task came: its time is its speed.
    iterative.on_ack(state, "b/0", m.TaskAck("r1", pushes["b/0"], has_code=True), 0.1)
    iterative.finished(state, ("r1", pushes["b/0"]), "b/0", 0.6)
    assert code in state.iterative.workers["b/0"].programs
    assert state.iterative.workers["b/0"].task_s == pytest.approx(0.5)


def test_a_worker_says_whether_a_pushed_tasks_shipped_code_was_there() -> None:
    state = make_state("b/0", ("a/0",))
    run = known_run(state, replace(info(), code_hash="c0de", shipped=True))
    job = job_of(run.state)
    spec = m.JobSpec("r1", "fib", "c0de", "a/0", 2, job.path, "fib", b"", shipped=True)
    acks = [
        e.msg
        for e in iterative.on_push(state, "a/0", m.TaskPush(spec), 0.0)
        if isinstance(e, Send) and isinstance(e.msg, m.TaskAck)
    ]
    assert acks == [m.TaskAck("r1", job.path, has_code=False)]
    state.shipped["c0de"] = {"fib": FIB}
    acks = [
        e.msg
        for e in iterative.on_push(state, "a/0", m.TaskPush(spec), 0.0)
        if isinstance(e, Send) and isinstance(e.msg, m.TaskAck)
    ]
    assert acks == [m.TaskAck("r1", job.path, has_code=True)]


def test_a_worker_that_takes_no_part_gives_its_task_back_and_gets_no_more_of_the_run() -> None:
    # A worker that lacks the plugin, or refuses the shipped code, answers "unknown": the
    # task is placed again on another worker, and this run is never pushed there again.
    state, tasks = _setup(n_com=4, replicas=2)
    tasks[0].run.pushed = True  # (as task_ready does)
    state.iterative.pending["r1"] = deque(tasks[:2])
    pushes = dict(_pushes(iterative.schedule(state, 0.0)))
    assert sorted(pushes) == ["b/0", "c/0"]
    # It acknowledged the task (it came), then said it does not have it.
    iterative.on_ack(state, "c/0", m.TaskAck("r1", pushes["c/0"], has_code=False), 0.05)
    fx = custody.on_job_state(state, "c/0", m.JobState("r1", pushes["c/0"], "unknown"), 0.1)
    assert not any(isinstance(e, ToCompute) for e in fx)  # not computed on the master
    assert state.iterative.refused == {"r1": {"c/0"}}
    assert state.iterative.counters.tasks_requeued == 1
    assert not state.iterative.workers["c/0"].fetching
    # b/0 takes it once its transfer is over; c/0 gets nothing, not even a replica.
    more = _pushes(iterative.on_ack(state, "b/0", m.TaskAck("r1", pushes["b/0"]), 0.2))
    assert more == [("b/0", pushes["c/0"])]
    iterative.finished(state, ("r1", pushes["b/0"]), "b/0", 1.0)
    assert all(to != "c/0" for to, _ in _pushes(iterative.schedule(state, 1.1)))
    iterative.forget_run(state, "r1")
    assert state.iterative.refused == {}


def test_a_push_lost_on_the_way_is_placed_again_without_leaving_the_worker_out() -> None:
    state, tasks = _setup(n_com=4, replicas=0)
    tasks[0].run.pushed = True
    state.iterative.pending["r1"] = deque(tasks[:2])
    pushes = dict(_pushes(iterative.schedule(state, 0.0)))
    # No ack came: the push was lost (a connection reset), the worker is not out of the run.
    custody.on_job_state(state, "c/0", m.JobState("r1", pushes["c/0"], "unknown"), 0.1)
    assert state.iterative.refused == {} and state.iterative.counters.tasks_requeued == 1
    assert [j.path for j in state.iterative.pending["r1"]] == [pushes["c/0"]]
    view = state.iterative.workers["c/0"]
    assert not view.holding and not view.in_transfer  # free for the next plan


def test_when_every_worker_takes_no_part_the_master_computes_the_tasks() -> None:
    # (Else the run would wait for ever: the master computes only when alone.)
    state, tasks = _setup(others=("b/0",), n_com=4, replicas=0)
    tasks[0].run.pushed = True
    state.iterative.pending["r1"] = deque(tasks)
    pushed = [path for _, path in _pushes(iterative.schedule(state, 0.0))]
    fx: list[Effect] = []
    while pushed:  # b/0 acknowledges each task it gets, then gives it back
        path = pushed.pop(0)
        pushed += [
            p for _, p in _pushes(iterative.on_ack(state, "b/0", m.TaskAck("r1", path), 0.05))
        ]
        fx += custody.on_job_state(state, "b/0", m.JobState("r1", path, "unknown"), 0.1)
    computed = [
        e.event.job for e in fx if isinstance(e, ToCompute) and isinstance(e.event, JobArrived)
    ]
    assert sorted(j.path for j in computed) == sorted(t.path for t in tasks)
    assert "r1" not in state.iterative.pending


def test_an_abort_reaches_a_pushed_task_still_waiting_for_its_code() -> None:
    # A replica pushed to a worker that lacks the code, whose first copy finished elsewhere:
    # the master's Abort drops it, and the code's arrival takes only the others.
    state = make_state("b/0", ("a/0",))
    state.cfg = replace(Config(), plugins=replace(PluginsConfig(), accept_shipped=True))
    run = known_run(state, replace(info(), code_hash="c0de", shipped=True))
    path = job_of(run.state).path
    fn = name_of(FIB.entry.fn)
    spec = m.JobSpec("r1", "fib", "c0de", "a/0", 2, path, fn, b"", pushed=True, shipped=True)
    iterative.on_push(state, "a/0", m.TaskPush(spec), 0.0)
    assert state.held["c0de"] == [(spec, "a/0")]
    # (Not aborted, the code's arrival takes it and tells the master: the second ack.)
    other = replace(state.held["c0de"][0][0], path=path + b"\x01")
    state.held["c0de"].append((other, "a/0"))
    aborts.on_abort(state, "a/0", m.Abort("r1", path))
    assert state.held["c0de"] == [(other, "a/0")]
    fx = shipping.on_code(state, shipping.CodeArrived("c0de", {"fib": FIB}), 1.0)
    assert [e.msg for e in fx if isinstance(e, Send)] == [m.TaskAck("r1", other.path, True)]
    assert state.held == {}
    # Only the task not aborted was taken (the aborted one starts nothing).
    taken = [
        e.event.job.path for e in fx if isinstance(e, ToCompute) and isinstance(e.event, JobArrived)
    ]
    assert taken in ([], [other.path])  # (it may wait for shared objects first)
