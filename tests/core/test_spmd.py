"""SPMD runs in the core (core/spmd/), case by case: where entity jobs go, a step that waits
for its ghosts, ghosts sent peer to peer and forwarded after a move, the migration protocol,
the gain decision on a thief's steal request, a holder's death (rollback), a drain."""

from __future__ import annotations

from dataclasses import replace

import pytest

from satind.config import Config, SpmdConfig
from satind.core import aborts, spmd, timers
from satind.core.effects import Effect, Send, Timer, ToCompute
from satind.core.events import Received
from satind.core.handle import handle
from satind.core.model.spmd import (
    COLLECT,
    MAX_GHOST_TAGS,
    PLACE,
    STEP,
    EntityLost,
    Held,
    Placement,
)
from satind.core.model.timers import GhostsAgain, MoveTimeout
from satind.core.spmd.placement import forget_run
from satind.core.state import PeerState
from satind.engine.frames import ChildResult, JobArrived
from satind.membership.view import State
from satind.net import messages as m
from satind.spmd import entity_job
from satind.work.events import EntityInput
from satind.work.jobs import Job, RunState
from tests.core.support import (
    FIB,
    FakeLink,
    declare,
    info,
    job_of,
    known_run,
    make_state,
    member,
)

COUNT = 4  # entities 0-1-2-3 in a line


def _neighbours(e: int) -> list[int]:
    return [n for n in (e - 1, e + 1) if 0 <= n < COUNT]


def _job(run: RunState, root: Job, e: int, phase: int, iteration: int, gen: int = 1) -> Job:
    args = ("heat2d", None, e, phase, iteration, gen, 10, _neighbours(e), COUNT, None)
    job = job_of(run, args, parent=root, index=root.nspawn)
    job.fn = entity_job.fn
    root.nspawn += 1
    return job


def _make(me: str, others: tuple[str, ...]) -> PeerState:
    """A peer's state whose members have the run's plugin (the same code): entities may go
    to any of them."""
    state = make_state(me, ())
    state.table.add_known([replace(member(n), plugins={"fib": FIB.code_hash}) for n in others])
    return state


def _master(**cfg: object) -> tuple[PeerState, RunState, Job]:
    state = _make("a/0", ("b/0", "c/0"))
    state.cfg = replace(Config(), spmd=replace(SpmdConfig(), **cfg))  # type: ignore[arg-type]
    run = known_run(state)
    return state, run.state, job_of(run.state)


def _sent(fx: list[Effect], kind: type[m.Message]) -> list[tuple[str, m.Message]]:
    return [(e.dest, e.msg) for e in fx if isinstance(e, Send) and isinstance(e.msg, kind)]


def _place_all(state: PeerState, run: RunState, root: Job) -> list[Effect]:
    fx: list[Effect] = []
    for e in range(COUNT):
        fx += spmd.task_ready(state, _job(run, root, e, PLACE, 0), 0.0)
    return fx


def _placed(state: PeerState, run: RunState, root: Job) -> None:
    """Every entity placed, its place job over (as the root's sync would have it)."""
    _place_all(state, run, root)
    place = state.spmd.runs["r1"]
    for job in list(place.jobs.values()):
        spmd.finished(state, m.JobResult("r1", job.path, None, None), 0.0)
        state.custody.drop_given(lambda j, job=job: j is job)  # type: ignore[misc]
    place.jobs.clear()  # the master's own: their entity_done hook


def test_entities_are_spread_evenly_and_each_push_names_its_neighbours_holders() -> None:
    state, run, root = _master()
    fx = _place_all(state, run, root)
    locator = state.spmd.runs["r1"].locator
    assert sorted(locator.values()) == ["a/0", "a/0", "b/0", "c/0"]  # the master holds some
    pushes = _sent(fx, m.TaskPush)
    assert len(pushes) == 2  # the other two are the master's own, delivered locally
    for dest, msg in pushes:
        assert isinstance(msg, m.TaskPush) and msg.entity is not None
        task = msg.entity
        assert locator[task.entity] == dest and task.phase == PLACE
        assert task.holders == [locator[n] for n in task.neighbours]  # nobody unplaced
    assert sum(isinstance(e, ToCompute) for e in fx) == 2


def test_a_step_waits_for_its_ghosts_and_sends_its_own_to_the_neighbours_holders() -> None:
    state = _make("b/0", ("a/0", "c/0"))
    run = known_run(state)  # mastered by a/0
    root = job_of(run.state)
    job = _job(run.state, root, 1, STEP, 0)
    task = m.EntityTask(1, STEP, 0, 1, 10, [0, 2], ["a/0", "c/0"])
    state.spmd.held[("r1", 1)] = Held(1, 0, [[1.0]])
    fx = spmd.arrive(state, job, task)  # no ghosts yet: it waits (and will ask again)
    assert not any(isinstance(e, ToCompute) for e in fx)
    assert fx == [Timer(state.cfg.spmd.ghost_wait_s, GhostsAgain("r1", 1, job, 0))]
    assert spmd.on_ghost(state, m.Ghost("r1", 1, m.GhostData(0, 1, 0, b"g0"))) == []
    fx = spmd.on_ghost(state, m.Ghost("r1", 1, m.GhostData(2, 1, 0, b"g2")))
    # The step goes with what it reads: its state and its ghosts (no table shared with the
    # compute thread: satind/engine/README.md).
    given = EntityInput([[1.0]], {0: b"g0", 2: b"g2"}, False, False)
    assert fx == [ToCompute(JobArrived(job, given))]
    assert state.spmd.held[("r1", 1)].ready == {0: b"g0", 2: b"g2"}
    # Its step ends: the new state stays here, its ghosts go straight to the neighbours.
    fx = spmd.entity_done(state, "r1", 1, 1, 1, [[2.0]], {0: b"up", 2: b"down"}, (0.1, 0.1, 0), 1.0)
    ghosts = _sent(fx, m.Ghost)
    assert sorted(dest for dest, _ in ghosts) == ["a/0", "c/0"]
    assert state.spmd.held[("r1", 1)].state == [[2.0]]
    assert state.spmd.held[("r1", 1)].iteration == 1


def _stepping(state: PeerState, run: RunState, root: Job) -> tuple[Placement, list[Job]]:
    """Every entity placed, then each one's step job of iteration 0 pushed (or, for the
    master's own entities, arrived): the run's placement and those jobs."""
    _placed(state, run, root)
    steps = [_job(run, root, e, STEP, 0) for e in range(COUNT)]
    for job in steps:
        spmd.task_ready(state, job, 0.0)
    return state.spmd.runs["r1"], steps


def _pushed(state: PeerState, e: int, iteration: int, until: int) -> tuple[Job, m.EntityTask]:
    """A step job a/0 pushed to this holder for the iterations from ``iteration`` to
    ``until``, with entity ``e`` held here at ``iteration``."""
    run = state.runs.active["r1"].state
    job = job_of(run, ("heat2d", None, e, STEP, iteration, 1, 10, _neighbours(e), COUNT, None))
    job.fn, job.origin = entity_job.fn, "a/0"
    state.custody.take(("r1", job.path), "a/0", job)
    state.spmd.held[("r1", e)] = Held(1, iteration, [[float(iteration)]])
    holders = ["a/0" if n < e else "c/0" for n in _neighbours(e)]
    return job, m.EntityTask(e, STEP, iteration, 1, 10, _neighbours(e), holders, True, until)


def _both_ghosts(state: PeerState, e: int, iteration: int) -> list[Effect]:
    fx: list[Effect] = []
    for n in _neighbours(e):
        fx += spmd.on_ghost(state, m.Ghost("r1", e, m.GhostData(n, 1, iteration, b"g")))
    return fx


def _arrived(fx: list[Effect]) -> JobArrived:
    (arrived,) = [e.event for e in fx if isinstance(e, ToCompute)]
    assert isinstance(arrived, JobArrived) and arrived.entity is not None
    return arrived


def test_a_push_covers_several_iterations_and_the_holder_steps_between_them() -> None:
    state = _make("b/0", ("a/0", "c/0"))
    known_run(state)  # mastered by a/0
    job, task = _pushed(state, 1, 4, 7)
    assert spmd.arrive(state, job, task)[0] == Timer(1.0, GhostsAgain("r1", 1, job, 4))
    for iteration in (4, 5):
        # A step inside the span runs as a job of its own, which the holder takes back:
        # nothing goes to the master, and it does not checkpoint.
        step = _arrived(_both_ghosts(state, 1, iteration))
        assert step.job is not job and step.job.origin == "b/0"
        assert step.entity == EntityInput(
            [[float(iteration)]], {0: b"g", 2: b"g"}, iteration > 4, False, iteration
        )
        done = spmd.entity_done(
            state,
            "r1",
            1,
            1,
            iteration + 1,
            [[iteration + 1.0]],
            {0: b"u", 2: b"d"},
            (0.1, 0.1, 0),
            1.0,
        )
        assert len(_sent(done, m.Ghost)) == 2
        step.job.value = [0.1, 0.1, 2, None, iteration + 1]
        fx = spmd.step_finished(state, step.job, 1.0)
        assert fx == [Timer(1.0, GhostsAgain("r1", 1, job, iteration + 1))]
        assert not _sent(fx, m.JobResult)
    # The last step is the pushed job itself: its result goes to the master, with the state
    # (it ends at a checkpoint).
    last = _arrived(_both_ghosts(state, 1, 6))
    assert last.job is job and last.entity is not None
    assert last.entity.checkpoint and last.entity.iteration == 6
    assert not state.spmd.stepping and spmd.step_finished(state, job, 2.0) is None
    # A step whose run was forgotten while it ran: its end goes nowhere, not to this peer.
    spmd.arrive(state, job, replace(task, iteration=7, until=9))
    state.spmd.held[("r1", 1)].iteration = 7
    stale = _arrived(_both_ghosts(state, 1, 7)).job
    forget_run(state, "r1")
    assert spmd.step_finished(state, stale, 3.0) == []


def test_a_step_that_raises_inside_a_span_fails_the_pushed_job_at_its_master() -> None:
    state = _make("b/0", ("a/0", "c/0"))
    known_run(state)
    job, task = _pushed(state, 1, 0, 10)
    spmd.arrive(state, job, task)
    step = _arrived(_both_ghosts(state, 1, 0)).job
    step.exc = ValueError("broken at iteration 0")
    fx = spmd.step_finished(state, step, 1.0)
    assert fx is not None
    ((dest, result),) = _sent(fx, m.JobResult)
    assert dest == "a/0" and isinstance(result, m.JobResult) and result.path == job.path
    assert result.error is not None and "broken at iteration 0" in result.error.message
    assert ("r1", 1) not in state.spmd.waiting


def test_a_step_that_raises_inside_a_span_of_the_masters_own_entity_fails_it_to_the_root() -> None:
    state, run, root = _master()
    place, steps = _stepping(state, run, root)
    mine = next(j for j in steps if place.locator[j.args[2]] == "a/0")
    key = ("r1", mine.args[2])
    state.spmd.held[key] = Held(1, 0, [[0.0]])
    fx = _both_ghosts(state, key[1], 0)
    step = _arrived(fx).job
    assert step is not mine  # the span's first step runs as a job of its own
    step.exc = ValueError("broken")
    fx = spmd.step_finished(state, step, 1.0) or []
    results = {
        id(e.event.job): e.event.exc
        for e in fx
        if isinstance(e, ToCompute) and isinstance(e.event, ChildResult)
    }
    # The root gets the step's error for its own entity's job (the job itself is the compute
    # side's: not written to here), and every other job of the push ends.
    assert isinstance(results.pop(id(mine)), ValueError) and not mine.done
    assert set(results) == {id(j) for j in steps if j is not mine}


def test_a_pushed_job_aborted_while_one_of_its_steps_runs_goes_no_further() -> None:
    state = _make("b/0", ("a/0", "c/0"))
    known_run(state)
    job, task = _pushed(state, 1, 0, 10)
    spmd.arrive(state, job, task)
    step = _arrived(_both_ghosts(state, 1, 0)).job
    fx = aborts.on_abort(state, "a/0", m.Abort("r1", job.path))
    assert not any(isinstance(e, ToCompute) for e in fx)  # not started as itself: dropped
    step.value = [0.1, 0.1, 2, None, 1]
    assert spmd.step_finished(state, step, 1.0) == []
    assert ("r1", 1) not in state.spmd.waiting and not state.spmd.stepping


def test_a_push_ends_at_push_every_at_the_next_checkpoint_or_at_the_end() -> None:
    state, _, _ = _master(push_every=10, checkpoint_every=25)
    assert [spmd.segment_end(state, i, 48) for i in (0, 7, 10, 20, 25, 40, 45)] == [
        10,
        10,
        20,
        25,
        30,
        48,
        48,
    ]


def test_a_failed_job_stops_the_other_jobs_of_its_push() -> None:
    state, run, root = _master()
    place, steps = _stepping(state, run, root)
    broken = next(j for j in steps if place.locator[j.args[2]] == "b/0")
    error = m.ErrorInfo("ValueError", "broken", "")
    fx = spmd.finished(state, m.JobResult("r1", broken.path, None, error), 1.0)
    stopped = [
        e.event.job for e in fx if isinstance(e, ToCompute) and isinstance(e.event, ChildResult)
    ]
    # Every other job ends (the root's sync would wait for them), the failed one with its
    # own error (custody applies it); c/0 is told to drop its job.
    assert set(map(id, stopped)) == {id(j) for j in steps if j is not broken}
    assert [dest for dest, _ in _sent(fx, m.Abort)] == ["c/0"]
    assert not place.jobs and not state.spmd.waiting


def test_ghosts_of_an_older_generation_or_too_far_ahead_are_dropped() -> None:
    state = _make("b/0", ("a/0",))
    known_run(state)
    state.spmd.held[("r1", 1)] = Held(2, 5, None)
    assert spmd.on_ghost(state, m.Ghost("r1", 1, m.GhostData(0, 1, 7, b"old"))) == []
    assert not state.spmd.inbox.get(("r1", 1))
    for it in range(5, 5 + 3 * MAX_GHOST_TAGS):  # a peer gone wrong: memory stays bounded
        spmd.on_ghost(state, m.Ghost("r1", 1, m.GhostData(0, 2, it, b"x")))
    assert len(state.spmd.inbox[("r1", 1)]) == MAX_GHOST_TAGS


def test_an_entity_moves_after_its_step_and_its_next_push_waits_for_the_move() -> None:
    state, run, root = _master()
    _placed(state, run, root)
    place = state.spmd.runs["r1"]
    entity = next(e for e, h in place.locator.items() if h == "b/0")
    step = _job(run, root, entity, STEP, 0)
    fx = spmd.task_ready(state, step, 0.0)
    assert _sent(fx, m.TaskPush)
    # b/0 asks, while the step runs: nothing moves yet.
    ask = m.MigrateRequest("r1", entity, "c/0", 0.5)
    assert spmd.on_migrate_request(state, "b/0", ask, 0.1) == []
    # The step's result: now the master tells b/0 to send it to c/0.
    fx = spmd.finished(state, m.JobResult("r1", step.path, None, None), 0.2)
    assert _sent(fx, m.EntityMove) == [("b/0", m.EntityMove("r1", entity, "c/0"))]
    # The next iteration's push is held back until c/0 has it.
    nxt = _job(run, root, entity, STEP, 1)
    assert spmd.task_ready(state, nxt, 0.3) == []
    fx = spmd.on_moved(state, "c/0", m.EntityMoved("r1", entity), 0.4)
    assert place.locator[entity] == "c/0" and place.moves == 1
    assert [dest for dest, _ in _sent(fx, m.TaskPush)] == ["c/0"]


def test_the_master_records_a_move_its_holder_made_and_holds_the_next_push_back() -> None:
    state, run, root = _master()
    _placed(state, run, root)
    place = state.spmd.runs["r1"]
    entity = next(e for e, h in place.locator.items() if h == "b/0")
    gen = place.gen
    # A move of an older generation (its step ended after a rollback placed it again, so the
    # copy it shipped is stale): ignored.
    assert (
        spmd.on_leaving(state, "b/0", m.EntityLeaving("r1", entity, "c/0", 0.5, gen - 1), 0.9) == []
    )
    assert place.locator[entity] == "b/0" and not place.moving
    fx = spmd.on_leaving(state, "b/0", m.EntityLeaving("r1", entity, "c/0", 0.5, gen), 1.0)
    assert fx == [Timer(state.cfg.spmd.move_timeout_s, MoveTimeout("r1", entity, "c/0"))]
    nxt = _job(run, root, entity, STEP, 10)
    assert spmd.task_ready(state, nxt, 1.1) == []  # held back: where is it?
    fx = spmd.on_moved(state, "c/0", m.EntityMoved("r1", entity, "", gen), 1.2)
    assert place.locator[entity] == "c/0" and [d for d, _ in _sent(fx, m.TaskPush)] == ["c/0"]
    # The new holder's word may come first (another connection): the move ends at once.
    other = next(e for e, h in place.locator.items() if h == "a/0")
    assert spmd.on_moved(state, "b/0", m.EntityMoved("r1", other, "", gen), 2.0) == []
    assert spmd.on_leaving(state, "a/0", m.EntityLeaving("r1", other, "b/0", 0.5, gen), 2.1) == []
    assert place.locator[other] == "b/0" and not place.moving and not place.arrived
    # A holder that is not the entity's: ignored.
    assert spmd.on_leaving(state, "a/0", m.EntityLeaving("r1", other, "c/0", 0.5, gen), 2.2) == []
    assert place.locator[other] == "b/0"
    # An older generation's arrival is not kept for later.
    assert spmd.on_moved(state, "c/0", m.EntityMoved("r1", other, "", gen - 1), 2.3) == []
    assert not place.arrived


def test_the_old_holder_ships_state_and_ghosts_and_forwards_late_ghosts() -> None:
    old = _make("b/0", ("a/0", "c/0"))
    known_run(old)
    old.spmd.held[("r1", 1)] = Held(1, 3, [[4.0, 5.0]])
    spmd.on_ghost(old, m.Ghost("r1", 1, m.GhostData(0, 1, 3, b"early")))
    assert spmd.on_move(old, "c/0", m.EntityMove("r1", 1, "c/0"), 1.0) == []  # not the master
    fx = spmd.on_move(old, "a/0", m.EntityMove("r1", 1, "c/0"), 1.0)
    ((dest, shipped),) = _sent(fx, m.EntityState)
    assert dest == "c/0" and isinstance(shipped, m.EntityState)
    assert ("r1", 1) not in old.spmd.held
    # A ghost that was on its way to the old holder follows the entity.
    late = m.Ghost("r1", 1, m.GhostData(2, 1, 3, b"late"))
    assert spmd.on_ghost(old, late) == [Send("c/0", late)]
    # The new holder installs it (with the ghost that came early) and tells the master.
    new = _make("c/0", ("a/0", "b/0"))
    known_run(new)
    fx = spmd.on_state(new, "b/0", shipped, 1.1)
    assert _sent(fx, m.EntityMoved) == [("a/0", m.EntityMoved("r1", 1, "", 1))]
    held = new.spmd.held[("r1", 1)]
    assert (held.gen, held.iteration, held.state) == (1, 3, [[4.0, 5.0]])
    assert new.spmd.inbox[("r1", 1)][(1, 3)] == {0: b"early"}


def _holder_with(entities: int, cpu_s: float = 0.01, wall_s: float = 0.01) -> PeerState:
    state = _make("b/0", ("a/0", "c/0"))
    known_run(state)
    for e in range(entities):
        held = Held(1, 10, None, cpu_s=cpu_s, wall_s=wall_s, size=10_000, period_s=0.1)
        state.spmd.held[("r1", e)] = held
        state.spmd.tasks[("r1", e)] = m.EntityTask(e, STEP, 10, 1, 1000)
    return state


def test_gain_a_crowded_holder_decides_to_move_one_entity_to_an_idle_thief() -> None:
    state = _holder_with(8)  # each gets 1/8 of a CPU here
    assert spmd.on_idle_thief(state, "c/0", 1.0, 5.0) == []  # c/0 offers a whole CPU
    ((key, (to, gain)),) = state.spmd.leaving.items()
    assert to == "c/0" and gain > 0.7
    # One at a time: the same thief again at once gets nothing.
    assert spmd.on_idle_thief(state, "c/0", 1.0, 5.1) == []
    assert len(state.spmd.leaving) == 1
    # The entity goes when its job's last step is over (iteration 10 to 11 here): the master
    # hears of it first, then c/0 gets it.
    fx = spmd.entity_done(state, "r1", key[1], 1, 11, [[1.0]], {}, (0.01, 0.01, 0), 6.0)
    sends = [(e.dest, type(e.msg)) for e in fx if isinstance(e, Send)]
    assert sends == [("a/0", m.EntityLeaving), ("c/0", m.EntityState)]
    assert key not in state.spmd.held and not state.spmd.leaving


def test_gain_no_proposal_when_the_thief_offers_less_than_the_entity_uses_here() -> None:
    state = _holder_with(4)  # 1/4 of a CPU each
    assert spmd.on_idle_thief(state, "c/0", 1.0 / 5, 5.0) == []  # a peer as fast with 4 already
    assert spmd.on_idle_thief(state, "c/0", 0.28, 5.0) == []  # a little better: under min_gain
    # A loaded holder (its steps get half a CPU: 0.125 each) and the same thief: it pays.
    loaded = _holder_with(4, cpu_s=0.005, wall_s=0.01)
    spmd.on_idle_thief(loaded, "c/0", 1.0 / 5, 5.0)
    assert [to for to, _ in loaded.spmd.leaving.values()] == ["c/0"]


def test_gain_the_migration_cost_and_a_short_remaining_life_stop_a_move() -> None:
    # 500 MB of state to move at 50 MB/s: 10 s, against a gain of at most 1.
    state = _holder_with(8)
    for held in state.spmd.held.values():
        held.size = 500_000_000
    assert spmd.on_idle_thief(state, "c/0", 1.0, 5.0) == []


def test_gain_a_measured_slow_link_to_the_thief_makes_the_move_too_costly() -> None:
    state = _holder_with(8)
    for held in state.spmd.held.values():
        held.size = 1_000_000
    # Large frames from c/0 came at 100 kB/s: moving 1 MB takes 10 s, against a gain of at
    # most 1 (the configured 50 MB/s would let it go).
    ask = m.GhostRequest("r9", 0, 1, 1, 0, "c/0")  # any message: a frame of 1 MB in 10 s
    handle(state, Received(FakeLink("c/0", measured=(1_000_000, 10.0)), ask), 4.0)
    assert state.table.bandwidth["c/0"] == pytest.approx(100_000)
    spmd.on_idle_thief(state, "c/0", 1.0, 5.0)
    assert not state.spmd.leaving
    fast = _holder_with(8)
    for held in fast.spmd.held.values():
        held.size = 1_000_000
    spmd.on_idle_thief(fast, "c/0", 1.0, 5.0)
    assert fast.spmd.leaving


def test_gain_no_entity_goes_back_to_the_peer_it_just_came_from() -> None:
    state = _holder_with(8)
    state.spmd.came_from["c/0"] = 4.0
    spmd.on_idle_thief(state, "c/0", 1.0, 5.0)
    assert not state.spmd.leaving
    spmd.on_idle_thief(state, "c/0", 1.0, 4.0 + state.cfg.spmd.settle_s + 0.1)
    assert state.spmd.leaving


def test_static_placement_never_proposes() -> None:
    state = _holder_with(8)
    state.cfg = replace(Config(), spmd=replace(SpmdConfig(), migrate=False))
    assert spmd.on_idle_thief(state, "c/0", 1.0, 5.0) == []
    assert not state.spmd.leaving


def test_a_dead_holder_fails_every_unfinished_entity_job_of_its_runs() -> None:
    state, run, root = _master()
    place, steps = _stepping(state, run, root)
    declare(state, "c/0", State.DEAD)
    lost_here = [j for j in steps if place.locator[j.args[2]] == "c/0"]
    fx: list[Effect] = []
    for job in state.custody.take_back_all("c/0"):
        fx += spmd.lost_job(state, job)
    fx += spmd.member_gone(state, "c/0")
    failed = [
        e.event.job
        for e in fx
        if isinstance(e, ToCompute)
        and isinstance(e.event, ChildResult)
        and isinstance(e.event.exc, EntityLost)
    ]
    remote = [j for j in steps if place.locator[j.args[2]] == "b/0"]
    local = [j for j in steps if place.locator[j.args[2]] == "a/0"]
    # c/0's job, b/0's (told to abort) and the master's own waiting ones: all fail.
    assert set(map(id, failed)) == set(map(id, lost_here + remote + local))
    assert [dest for dest, _ in _sent(fx, m.Abort)] == ["b/0"]
    assert not place.jobs and not state.spmd.waiting
    # The next generation places the lost entity on a live member.
    spmd.task_ready(state, _job(run, root, lost_here[0].args[2], PLACE, 0, gen=2), 1.0)
    assert "c/0" not in place.locator.values()


def test_a_step_of_a_lost_entity_fails_at_once() -> None:
    state, run, root = _master()
    _place_all(state, run, root)
    place = state.spmd.runs["r1"]
    entity = next(e for e, h in place.locator.items() if h == "c/0")
    declare(state, "c/0", State.DEAD)
    spmd.member_gone(state, "c/0")
    fx = spmd.task_ready(state, _job(run, root, entity, STEP, 0), 1.0)
    assert isinstance(fx[0], ToCompute) and isinstance(fx[0].event, ChildResult)
    assert isinstance(fx[0].event.exc, EntityLost)


def test_a_draining_holder_asks_for_each_entity_to_go_and_stays_until_they_went() -> None:
    from satind.core import drain

    state = _holder_with(2)
    fx = drain.start(state, "test", 1.0)
    asks = _sent(fx, m.MigrateRequest)
    assert sorted(a.entity for _, a in asks) == [0, 1]  # type: ignore[attr-defined]
    assert all(a.to == "" for _, a in asks)  # type: ignore[attr-defined]
    assert not drain.drained(state)  # entities still here
    # The master picks the least loaded usable member for each.
    master, run, root = _master()
    _placed(master, run, root)
    place = master.spmd.runs["r1"]
    entity = next(e for e, h in place.locator.items() if h == "b/0")
    declare(master, "b/0", State.ALIVE)
    fx = spmd.on_migrate_request(master, "b/0", m.MigrateRequest("r1", entity, "", 0.0), 2.0)
    ((dest, move),) = _sent(fx, m.EntityMove)
    assert dest == "b/0" and isinstance(move, m.EntityMove) and move.to == "c/0"


def test_collect_runs_at_once() -> None:
    state = _make("b/0", ("a/0",))
    run = known_run(state)
    job = _job(run.state, job_of(run.state), 0, COLLECT, 10)
    task = m.EntityTask(0, COLLECT, 10, 1, 10, [1], ["a/0"])
    assert spmd.arrive(state, job, task) == [ToCompute(JobArrived(job))]


def test_a_step_still_waiting_asks_again_and_the_neighbours_holder_resends() -> None:
    """A ghost sent to a holder the entity had left is lost with it: the step asks again."""
    waiter = _make("c/0", ("a/0", "b/0"))
    run = known_run(waiter)
    job = _job(run.state, job_of(run.state), 2, STEP, 4)
    waiter.spmd.held[("r1", 2)] = Held(1, 4, [[0.0]])
    task = m.EntityTask(2, STEP, 4, 1, 10, [1, 3], ["b/0", "c/0"])
    (later,) = spmd.arrive(waiter, job, task)
    spmd.on_ghost(waiter, m.Ghost("r1", 2, m.GhostData(3, 1, 4, b"from3")))  # 3 is here
    assert later == Timer(waiter.cfg.spmd.ghost_wait_s, GhostsAgain("r1", 2, job, 4))
    fx = timers.fire(waiter, later.event, 1.0)
    ((dest, ask),) = _sent(fx, m.GhostRequest)
    assert dest == "b/0" and ask == m.GhostRequest("r1", 2, 1, 1, 4, "c/0")
    assert fx[-1] == later  # and again, while it waits
    # b/0 holds entity 1 and still has what it sent at the end of that step.
    holder = _make("b/0", ("a/0", "c/0"))
    known_run(holder)
    holder.spmd.held[("r1", 1)] = Held(1, 3, None)
    holder.spmd.tasks[("r1", 1)] = m.EntityTask(1, STEP, 3, 1, 10, [0, 2], ["a/0", "c/0"])
    spmd.entity_done(holder, "r1", 1, 1, 4, None, {0: b"to0", 2: b"to2"}, (0.1, 0.1, 0), 2.0)
    assert isinstance(ask, m.GhostRequest)
    ((dest, again),) = _sent(spmd.on_ghost_request(holder, ask), m.Ghost)
    assert dest == "c/0"
    assert isinstance(again, m.Ghost)
    # The waiting step starts with it; the loop of asking ends.
    given = EntityInput([[0.0]], {3: b"from3", 1: b"to2"}, False, False, 4)
    assert spmd.on_ghost(waiter, again) == [ToCompute(JobArrived(job, given))]
    assert timers.fire(waiter, later.event, 2.0) == []


def test_a_move_refused_by_the_old_holder_leaves_the_entity_there_by_the_new_one_loses_it() -> None:
    state, run, root = _master()
    _placed(state, run, root)
    place = state.spmd.runs["r1"]
    a, b = sorted(e for e, h in place.locator.items() if h != "a/0")
    for entity in (a, b):
        holder = place.locator[entity]
        to = "c/0" if holder == "b/0" else "b/0"
        spmd.on_migrate_request(state, holder, m.MigrateRequest("r1", entity, to, 0.5), 1.0)
        assert place.moving[entity] == to
        spmd.task_ready(state, _job(run, root, entity, STEP, 0), 1.0)  # held back
    # a's old holder could not encode it: it stays, its push goes there now.
    fx = spmd.on_moved(state, place.locator[a], m.EntityMoved("r1", a, "too big"), 2.0)
    assert [d for d, _ in _sent(fx, m.TaskPush)] == [place.locator[a]]
    # b's new holder could not read it: lost, the step fails, the run rolls back: a's job,
    # which would wait for b's ghosts, stops too.
    fx = spmd.on_moved(state, place.moving[b], m.EntityMoved("r1", b, "unreadable"), 2.0)
    failed = [
        e.event.job.args[2]
        for e in fx
        if isinstance(e, ToCompute)
        and isinstance(e.event, ChildResult)
        and isinstance(e.event.exc, EntityLost)
    ]
    assert sorted(failed) == sorted((a, b)) and b in place.lost
    assert not place.jobs and not place.held_back


def test_a_move_without_an_answer_times_out_into_a_rollback() -> None:
    state, run, root = _master()
    _placed(state, run, root)
    place = state.spmd.runs["r1"]
    entity = next(e for e, h in place.locator.items() if h == "b/0")
    fx = spmd.on_migrate_request(state, "b/0", m.MigrateRequest("r1", entity, "c/0", 0.5), 1.0)
    timeout = Timer(state.cfg.spmd.move_timeout_s, MoveTimeout("r1", entity, "c/0"))
    assert timeout in fx
    spmd.task_ready(state, _job(run, root, entity, STEP, 0), 1.0)
    fx = timers.fire(state, timeout.event, 31.0)
    assert entity in place.lost and entity not in place.moving
    assert isinstance(fx[0], ToCompute) and isinstance(fx[0].event, ChildResult)


def test_a_holder_drops_an_entity_its_master_placed_elsewhere_since() -> None:
    state, run, root = _master()
    _placed(state, run, root)
    place = state.spmd.runs["r1"]
    entity = next(e for e, h in place.locator.items() if h == "b/0")
    # c/0 still holds it from an older generation and asks (it drains): drop it.
    fx = spmd.on_migrate_request(state, "c/0", m.MigrateRequest("r1", entity, "", 0.0), 1.0)
    assert _sent(fx, m.EntityMove) == [("c/0", m.EntityMove("r1", entity, ""))]
    holder = _make("c/0", ("a/0", "b/0"))
    known_run(holder)
    holder.spmd.held[("r1", entity)] = Held(1, 3, None)
    spmd.on_move(holder, "a/0", m.EntityMove("r1", entity, ""), 1.1)
    assert not holder.spmd.held


def test_a_step_that_ends_after_its_run_was_dropped_leaves_nothing_behind() -> None:
    from satind.core.lifecycle import drop

    state = _make("b/0", ("a/0",))
    known_run(state)
    drop(state, "r1")
    spmd.entity_done(state, "r1", 0, 1, 5, None, {}, (0.1, 0.1, 0), 1.0)
    assert not state.spmd.held


def test_a_ghost_that_comes_before_its_run_is_known_here_waits_for_its_step() -> None:
    """The neighbour's holder may be faster than the master's announcement and push, which
    come on another connection: its ghost is kept, not dropped (a dropped one was asked for
    again a second later at best, and never answered once its sender had moved on)."""
    from satind.core.lifecycle import on_announces

    state = _make("b/0", ("a/0", "c/0"))
    assert spmd.on_ghost(state, m.Ghost("r1", 1, m.GhostData(0, 1, 0, b"g0"))) == []
    run = known_run(state)  # the master's push, or its announcement, comes after it
    state.spmd.held[("r1", 1)] = Held(1, 0, [[1.0]])
    job = _job(run.state, job_of(run.state), 1, STEP, 0)
    task = m.EntityTask(1, STEP, 0, 1, 10, [0], ["a/0"])
    given = EntityInput([[1.0]], {0: b"g0"}, False, False)
    assert spmd.arrive(state, job, task) == [ToCompute(JobArrived(job, given))]
    assert state.spmd.held[("r1", 1)].ready == {0: b"g0"}
    # A ghost of a run never known here that ended: forgotten with the end's news, and one
    # that comes after the end is dropped.
    spmd.on_ghost(state, m.Ghost("r9", 1, m.GhostData(0, 1, 0, b"g0")))
    assert ("r9", 1) in state.spmd.inbox
    over = info("r9", "c/0")
    on_announces(state, [m.RunAnnounce(over, "done")], 1.0)
    assert ("r9", 1) not in state.spmd.inbox
    assert spmd.on_ghost(state, m.Ghost("r9", 1, m.GhostData(0, 1, 1, b"late"))) == []
    assert ("r9", 1) not in state.spmd.inbox


def test_the_holder_an_entity_left_still_answers_for_the_ghosts_it_sent_from_there() -> None:
    """A neighbour's step asks the holder it knew for a lost ghost: the entity may have moved
    on since, and its new holder never had what it sent before."""
    old = _make("b/0", ("a/0", "c/0"))
    known_run(old)
    old.spmd.held[("r1", 1)] = Held(1, 0, None)
    old.spmd.tasks[("r1", 1)] = m.EntityTask(1, PLACE, 0, 1, 10, [0, 2], ["a/0", "c/0"])
    spmd.entity_done(old, "r1", 1, 1, 0, None, {0: b"to0", 2: b"to2"}, (0.0, 0.0, 0), 1.0)
    _sent(spmd.on_move(old, "a/0", m.EntityMove("r1", 1, "c/0"), 1.1), m.EntityState)
    assert ("r1", 1) not in old.spmd.held
    ask = m.GhostRequest("r1", 0, 1, 1, 0, "a/0")  # entity 0's step waits for 1's ghost
    assert _sent(spmd.on_ghost_request(old, ask), m.Ghost) == [
        ("a/0", m.Ghost("r1", 0, m.GhostData(1, 1, 0, b"to0")))
    ]
    # One it made after it left is its new holder's to give.
    later = m.GhostRequest("r1", 0, 1, 1, 1, "a/0")
    assert spmd.on_ghost_request(old, later) == [Send("c/0", later)]
