"""An entity lost anywhere but in ``member_gone`` with jobs out (a holder that died between two
pushes, a move that failed or timed out, a job its holder no longer has): every job of the
run fails, so that the root's sync returns and the run rolls back. Before, only the lost
entity's job failed; the others waited at their holders for its ghosts for ever, and so did
the root."""

from __future__ import annotations

from satind.core import spmd, timers
from satind.core.effects import Effect, ToCompute
from satind.core.model.spmd import STEP, EntityLost
from satind.core.model.timers import MoveTimeout
from satind.engine.frames import ChildResult
from satind.membership.view import State
from satind.net import messages as m
from tests.core.support import declare, job_of, known_run
from tests.core.test_spmd import COUNT, _job, _make, _master, _placed, _sent


def _lost(fx: list[Effect]) -> set[int]:
    return {
        id(e.event.job)
        for e in fx
        if isinstance(e, ToCompute)
        and isinstance(e.event, ChildResult)
        and isinstance(e.event.exc, EntityLost)
    }


def test_a_holder_dead_between_two_pushes_fails_the_whole_next_push() -> None:
    state, run, root = _master()
    _placed(state, run, root)
    place = state.spmd.runs["r1"]
    # A span is over (every result in), the root has not pushed the next one yet: c/0 dies.
    declare(state, "c/0", State.DEAD)
    assert spmd.member_gone(state, "c/0") == []  # no job out to stop
    steps = [_job(run, root, e, STEP, 10) for e in range(COUNT)]
    fx: list[Effect] = []
    for job in steps:
        fx += spmd.task_ready(state, job, 1.0)
    # Every job fails (the root rolls back); none is left waiting for c/0's entity's ghosts.
    assert _lost(fx) == set(map(id, steps))
    assert not _sent(fx, m.TaskPush) and not place.jobs and not state.spmd.waiting


def test_a_move_that_times_out_fails_every_job_of_the_push() -> None:
    state, run, root = _master()
    _placed(state, run, root)
    place = state.spmd.runs["r1"]
    entity = next(e for e, h in place.locator.items() if h == "b/0")
    gen = place.gen
    # b/0 moved it to c/0 at its span's end; the next push: its job waits for the move, the
    # others go out (to a/0 itself, and to c/0).
    fx = spmd.on_leaving(state, "b/0", m.EntityLeaving("r1", entity, "c/0", 0.5, gen), 1.0)
    (_timeout,) = fx  # the move's timer
    steps = [_job(run, root, e, STEP, 10) for e in range(COUNT)]
    for job in steps:
        spmd.task_ready(state, job, 1.0)
    assert entity in place.held_back and len(place.jobs) == COUNT - 1
    fx = timers.fire(state, MoveTimeout("r1", entity, "c/0"), 31.0)
    assert _lost(fx) == set(map(id, steps))
    assert not place.jobs and not place.held_back and not state.spmd.waiting


def test_a_move_to_a_member_already_dead_here_fails_every_job_of_the_next_push() -> None:
    # Four entities on a/0 (the master), b/0, c/0, d/0; e/0 holds none (an idle thief).
    state = _make("a/0", ("b/0", "c/0", "d/0", "e/0"))
    run = known_run(state).state
    root = job_of(run)
    _placed(state, run, root)
    place = state.spmd.runs["r1"]
    assert "e/0" not in place.locator.values()
    entity = next(e for e, h in place.locator.items() if h == "b/0")
    steps = [_job(run, root, e, STEP, 0) for e in range(COUNT)]
    for job in steps:
        spmd.task_ready(state, job, 0.0)
    for job in steps:  # every span but b/0's is over
        if job.args[2] != entity:
            place.jobs.pop(job.args[2], None)
            state.custody.drop_given(lambda j, job=job: j is job)  # type: ignore[misc]
    state.spmd.waiting.clear()  # (the master's own entity's step ended too)
    # e/0 dies (it held nothing: nothing to stop); then b/0, which decided to move its
    # entity there and had not heard of the death yet, ends its span and says so.
    declare(state, "e/0", State.DEAD)
    assert spmd.member_gone(state, "e/0") == []
    b_job = place.jobs[entity]
    notice = m.EntityLeaving("r1", entity, "e/0", 0.5, place.gen)
    spmd.on_leaving(state, "b/0", notice, 1.0)
    spmd.finished(state, m.JobResult("r1", b_job.path, None, None), 1.1)
    nxt = [_job(run, root, e, STEP, 10) for e in range(COUNT)]
    fx: list[Effect] = []
    for job in nxt:
        fx += spmd.task_ready(state, job, 1.2)
    assert _lost(fx) == set(map(id, nxt))
    assert not _sent(fx, m.TaskPush) and not place.jobs and not state.spmd.waiting
