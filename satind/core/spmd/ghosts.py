"""A holder's entity jobs and their ghosts (the story: core/spmd/__init__.py): an entity job
pushed here waits until the ghosts of its iteration are in, then goes to the compute side; a
ghost goes straight to the neighbour's holder, and a lost one is asked for again."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from satind.core.effects import WARNING, Effects, Send, Timer, ToCompute
from satind.core.model.spmd import (
    MAX_GHOST_TAGS,
    PLACE,
    STEP,
    EntityKey,
    EntityLost,
    Spmd,
)
from satind.core.model.timers import GhostsAgain
from satind.core.thief import accept_stolen, job_finished
from satind.net import messages as m
from satind.work.events import ChildResult, EntityInput, JobArrived
from satind.work.jobs import Job

if TYPE_CHECKING:
    from satind.core.state import PeerState


def on_push(state: PeerState, master: str, msg: m.TaskPush) -> Effects:
    """An entity job pushed to us by its master."""
    assert msg.entity is not None
    job, fx = accept_stolen(state, msg.job, master)
    if job is None:
        return fx
    job.run.pushed = True
    return fx + arrive(state, job, msg.entity)


def arrive(state: PeerState, job: Job, task: m.EntityTask) -> Effects:
    """An entity job here: a step waits for its ghosts; the others run at once."""
    key = (job.run.run_id, task.entity)
    state.spmd.tasks[key] = task
    if task.phase != STEP:
        if task.phase == PLACE:
            state.spmd.moved.pop(key, None)
            return [ToCompute(JobArrived(job))]
        held = state.spmd.held.get(key)  # COLLECT: the entity's state goes with the job
        given = None if held is None else EntityInput(held.state, {}, held.wall_s > 0, False)
        return [ToCompute(JobArrived(job, given))]
    state.spmd.waiting[key] = (job, task)
    fx = try_start(state, key)
    if key in state.spmd.waiting:
        fx.append(Timer(state.cfg.spmd.ghost_wait_s, GhostsAgain(*key, job, task.iteration)))
    return fx


def ghosts_again(state: PeerState, key: EntityKey, job: Job, iteration: int) -> Effects:
    """Timer ``GhostsAgain``: while the step ``job`` waits, every ``spmd.ghost_wait_s``, ask
    the holders of the neighbours whose ghosts have not come (a ghost sent to a holder the
    entity had left may have been lost with it)."""
    waiting = state.spmd.waiting.get(key)
    if waiting is None or waiting[0] is not job or waiting[1].iteration != iteration:
        return []  # started, dropped or replaced: the loop ends (the next step has its own)
    task = waiting[1]
    box = state.spmd.inbox.get(key, {}).get((task.gen, task.iteration), {})
    fx: Effects = []
    for neighbour, holder in zip(task.neighbours, task.holders, strict=False):
        if neighbour not in box and holder:
            ask = m.GhostRequest(key[0], key[1], neighbour, task.gen, task.iteration, state.name)
            fx += on_ghost_request(state, ask) if holder == state.name else [Send(holder, ask)]
    return [*fx, Timer(state.cfg.spmd.ghost_wait_s, GhostsAgain(*key, job, iteration))]


def on_ghost_request(state: PeerState, msg: m.GhostRequest) -> Effects:
    """A neighbour's step waits for our entity's ghost: send it again if we still have it,
    or pass the request on to where the entity went."""
    spmd = state.spmd
    key = (msg.run_id, msg.sender)
    held = spmd.held.get(key)
    moved = spmd.moved.get(key) if held is None else None
    if held is not None:
        sent = held.sent
    elif moved is not None:
        sent = moved.sent  # it left, but may have sent that one from here
    else:
        return []
    data = sent.get((msg.gen, msg.iteration), {}).get(msg.entity)
    if data is None:
        if moved is not None and moved.to != state.name:
            return [Send(moved.to, msg)]  # made after it left, at its new holder
        return []  # not made yet: it comes when the step that makes it ends
    ghost = m.Ghost(msg.run_id, msg.entity, m.GhostData(msg.sender, msg.gen, msg.iteration, data))
    if msg.requester == state.name:
        return on_ghost(state, ghost)
    return [Send(msg.requester, ghost)]


def try_start(state: PeerState, key: EntityKey) -> Effects:
    spmd = state.spmd
    waiting = spmd.waiting.get(key)
    held = spmd.held.get(key)
    if waiting is None or held is None:
        return []
    job, task = waiting
    if (held.gen, held.iteration) != (task.gen, task.iteration):
        return []
    box = spmd.inbox.get(key, {}).get((task.gen, task.iteration), {})
    if any(n not in box for n in task.neighbours):
        return []
    del spmd.waiting[key]
    held.ready = box
    prune(spmd, key, (task.gen, task.iteration + 1))
    last = task.phase != STEP or task.until <= task.iteration + 1
    # The step reads its state and ghosts from the job's message, not from this table.
    given = EntityInput(
        held.state, dict(box), held.wall_s > 0, task.checkpoint and last, task.iteration
    )
    if last:
        return [ToCompute(JobArrived(job, given))]
    # A step inside the pushed job's span: a job of its own, whose end this peer takes
    # (``step_finished``), not the master. Placed, as the pushed job is: no thief takes it,
    # and a waiting frame of any run starts it (work/jobs.py ``is_placed``).
    step = Job(job.fn, job.args, None, 0, job.run, 0.0)
    step.origin = state.name
    step.set_path(job.path)
    spmd.stepping[step] = (key, job, task)
    return [ToCompute(JobArrived(step, given))]


def step_finished(state: PeerState, step: Job, now: float) -> Effects | None:
    """The compute side finished a job: if it was a step inside a pushed job's span, the
    entity goes on with its next iteration when that iteration's ghosts are in (None: not
    one of those). A step that raised fails the pushed job with its exception."""
    spmd = state.spmd
    if step not in spmd.stepping:
        # One whose run was forgotten meanwhile (``forget_run``) is still ours: its result
        # goes nowhere (its origin is this peer).
        return [] if getattr(step, "origin", None) == state.name else None
    key, job, task = spmd.stepping.pop(step)
    if task.phase < 0 or job.run.aborted:
        return []  # aborted while it stepped (``drop_waiting``), or its run is over
    if step.error is not None:
        return finish_pushed(state, job, step.error)
    held = spmd.held.get(key)
    if held is None or held.gen != task.gen:
        # It rolled back meanwhile (placed again here, of a newer generation): this job can
        # never go on. It fails, so that nobody waits for it.
        return finish_pushed(state, job, EntityLost(f"entity {key[1]} was placed again"))
    nxt = replace(task, iteration=task.iteration + 1)
    spmd.tasks[key] = nxt
    spmd.waiting[key] = (job, nxt)
    fx = try_start(state, key)
    if key in spmd.waiting:
        fx.append(Timer(state.cfg.spmd.ghost_wait_s, GhostsAgain(*key, job, nxt.iteration)))
    return fx


def prune(spmd: Spmd, key: EntityKey, keep_from: tuple[int, int]) -> None:
    """Drop ghosts older than ``keep_from`` (consumed, or of an older generation)."""
    box = spmd.inbox.get(key)
    if box:
        for tag in [t for t in box if t < keep_from]:
            del box[tag]


def drop_waiting(state: PeerState, job: Job) -> bool:
    """An aborted entity job that has not started, or that is between the steps of its span
    (waiting for ghosts, or one of its steps running): gone. True if it was one."""
    spmd = state.spmd
    for key, (j, _) in list(spmd.waiting.items()):
        if j is job:
            del spmd.waiting[key]
            spmd.leaving.pop(key, None)  # no span end to move it at
            return True
    for step, (key, j, task) in list(spmd.stepping.items()):
        if j is job:
            # The step runs on (the compute side has it); its end goes no further.
            spmd.stepping[step] = (key, j, replace(task, phase=-1))
            spmd.leaving.pop(key, None)
            return True
    return False


def finish_pushed(state: PeerState, job: Job, exc: BaseException) -> Effects:
    """A pushed job whose span ended here without running its last step: it fails with
    ``exc``. On the master (the entity is its own) the job is a child of the root, which the
    compute side finishes (the job is the compute side's: nothing is written to it here);
    from another holder its result goes to the master as any finished job's."""
    if job.parent is not None:
        return [ToCompute(ChildResult(job, None, exc))]
    job.exc = exc  # a pushed job between its steps: only this side holds it
    return job_finished(state, job)


def deliver(state: PeerState, run_id: str, entity: int, ghost: m.GhostData, holder: str) -> Effects:
    if holder and holder != state.name:
        return [Send(holder, m.Ghost(run_id, entity, ghost))]
    return on_ghost(state, m.Ghost(run_id, entity, ghost))


def on_ghost(state: PeerState, msg: m.Ghost) -> Effects:
    """A neighbour's data for one of our entities (or one that left: forwarded)."""
    spmd = state.spmd
    key = (msg.run_id, msg.entity)
    g = msg.ghost
    held = spmd.held.get(key)
    moved = spmd.moved.get(key)
    if held is None and moved is not None and g.gen <= moved.gen:
        return [Send(moved.to, msg)]  # the entity left (a newer generation may come back)
    if held is not None and (g.gen, g.iteration) < (held.gen, held.iteration):
        return []  # of an older generation, or consumed
    if msg.run_id not in state.runs.active and (
        msg.run_id in state.runs.ended or msg.run_id in state.runs.finished
    ):
        return []  # the run is over here
    # A run not known here yet is kept: the neighbour's holder can be faster than the
    # master's announcement and push on another connection, and a ghost dropped then is
    # asked for again only a second later (``_ask_again``), or never answered once the
    # neighbour moved on. An end announcement forgets it (``forget_run``).
    box = spmd.inbox.setdefault(key, {})
    if (g.gen, g.iteration) not in box and len(box) >= MAX_GHOST_TAGS:
        # A holder needs the ghosts of one or two iterations; more is a peer gone wrong.
        state.note(
            WARNING,
            __name__,
            "dropping a ghost for entity %d of %s: too many ahead",
            g.sender,
            msg.run_id,
        )
        return []
    box.setdefault((g.gen, g.iteration), {})[g.sender] = g.data
    return try_start(state, key)
