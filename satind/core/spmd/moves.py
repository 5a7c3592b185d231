"""How an SPMD run's entities move (the story: core/spmd/__init__.py): the master pushes each
entity's job to its holder, for a span of iterations; a holder whose gain pays off moves an
entity when that job's last step is over and tells the master (``leave``, ``on_leaving``);
a draining holder asks the master, which picks where (``on_migrate_request``, ``maybe_move``);
the old holder ships the state (``ship``), the new one installs it (``on_state``) and says
so (``EntityMoved``), and the master's locator follows (``on_moved``), releasing the push it
held back meanwhile."""

from __future__ import annotations

from typing import TYPE_CHECKING

from satind.core.effects import ERROR, INFO, WARNING, Changed, Effects, Send, Timer, ToCompute
from satind.core.model.spmd import STEP, Departed, EntityKey, Held, Placement
from satind.core.model.timers import MoveTimeout
from satind.core.spmd.ghosts import arrive, prune, try_start
from satind.core.spmd.placement import alive, least_loaded, usable
from satind.core.spmd.rollback import stop_jobs
from satind.core.victim import job_spec
from satind.net import codec
from satind.net import messages as m
from satind.work.events import ChildResult
from satind.work.jobs import Job

if TYPE_CHECKING:
    from satind.core.state import PeerState


def segment_end(state: PeerState, iteration: int, iterations: int) -> int:
    """Where a step job pushed at ``iteration`` ends: after ``spmd.push_every`` iterations,
    at the next checkpoint or at the run's end, whichever comes first. Every entity's job of
    one push ends at the same iteration, so the root's sync is the only barrier."""
    cfg = state.cfg.spmd
    push, every = max(cfg.push_every, 1), max(cfg.checkpoint_every, 1)
    return min((iteration // push + 1) * push, (iteration // every + 1) * every, iterations)


def send_job(state: PeerState, place: Placement, job: Job, now: float) -> Effects:
    """An entity job to its holder: pushed (custody keeps it), or arrived here."""
    run_id = job.run.run_id
    entity, phase, iteration, gen, iterations, neighbours = job.args[2:8]
    holder = place.locator[entity]
    until = segment_end(state, iteration, iterations) if phase == STEP else 0
    every = max(state.cfg.spmd.checkpoint_every, 1)
    checkpoint = phase == STEP and (until % every == 0 or until == iterations)
    task = m.EntityTask(
        entity,
        phase,
        iteration,
        gen,
        iterations,
        list(neighbours),
        [place.locator.get(n, "") for n in neighbours],
        checkpoint,
        until,
    )
    place.jobs[entity] = job
    if holder == state.name:
        return arrive(state, job, task)
    run = state.runs.active.get(run_id)
    if run is None or job.run.aborted:
        return []
    try:
        args = codec.encode_value(job.args, state.cfg.net.max_frame_bytes)
    except codec.EncodeError as exc:
        place.jobs.pop(entity, None)
        return [ToCompute(ChildResult(job, None, exc))]
    spec = job_spec(run.info, job, args, [], pushed=True)
    state.custody.give((run_id, job.path), job, holder, now)
    place.by_path[job.path] = entity
    return [Send(holder, m.TaskPush(spec, task))]


def maybe_move(state: PeerState, run_id: str, place: Placement, entity: int, now: float) -> Effects:
    if entity not in place.wanted or entity in place.moving or entity in place.jobs:
        return []
    to = place.wanted.pop(entity)
    holder = place.locator.get(entity, "")
    if not to:
        to = least_loaded(state, run_id, place, exclude=holder)
    if to == holder or not usable(state, to, run_id) or not alive(state, holder):
        return []
    place.moving[entity] = to
    state.note(INFO, __name__, "moving entity %d of %s from %s to %s", entity, run_id, holder, to)
    fx: Effects = [Timer(state.cfg.spmd.move_timeout_s, MoveTimeout(run_id, entity, to))]
    if holder == state.name:
        return fx + ship(state, run_id, entity, to, now)
    return [*fx, Send(holder, m.EntityMove(run_id, entity, to))]


def move_timeout(state: PeerState, event: MoveTimeout, now: float) -> Effects:
    """Timer ``MoveTimeout``: a move that neither ended nor failed in time (an answer lost
    with a peer that did not die): the entity counts as lost, and the run rolls back,
    instead of waiting for ever."""
    place = state.spmd.runs.get(event.run_id)
    if place is None or place.moving.get(event.entity) != event.to:
        return []
    refusal = m.EntityMoved(event.run_id, event.entity, f"no answer from {event.to} in time")
    return on_moved(state, event.to, refusal, now)


def on_migrate_request(state: PeerState, holder: str, msg: m.MigrateRequest, now: float) -> Effects:
    """A holder asks for one of its entities to move (Γ paid off, or it drains)."""
    place = state.spmd.runs.get(msg.run_id)
    if place is None:
        return []
    if place.locator.get(msg.entity) != holder and place.moving.get(msg.entity) != holder:
        # An entity of an older generation (placed elsewhere since, or by a predecessor):
        # the holder drops it (EntityMove nowhere), or a draining holder would wait forever.
        return [Send(holder, m.EntityMove(msg.run_id, msg.entity, ""))]
    if msg.entity in place.moving or (msg.to and not usable(state, msg.to, msg.run_id)):
        return []
    if msg.to and not state.cfg.spmd.migrate:
        return []
    place.wanted[msg.entity] = msg.to
    return maybe_move(state, msg.run_id, place, msg.entity, now)


def on_moved(state: PeerState, sender: str, msg: m.EntityMoved, now: float) -> Effects:
    """The entity is installed at its new holder: the locator follows, held pushes go. A
    refusal from the old holder: it still has the entity; from the new one: it is lost."""
    place = state.spmd.runs.get(msg.run_id)
    entity = msg.entity
    if place is None:
        return []
    if entity not in place.moving:
        if not msg.refused and msg.gen == place.gen and sender != place.locator.get(entity):
            # Before the old holder's ``EntityLeaving``, which comes on another connection.
            place.arrived[entity] = sender
        return []
    to = place.moving[entity]
    if sender not in (to, place.locator.get(entity)):
        return []
    del place.moving[entity]
    if not msg.refused:
        place.locator[entity] = to
        place.moves += 1
        state.spmd.counters.entity_moves += 1
    elif sender != place.locator.get(entity):
        state.note(
            WARNING,
            __name__,
            "entity %d of %s lost moving to %s: %s",
            entity,
            msg.run_id,
            to,
            msg.refused,
        )
        place.lost.add(entity)
    if entity in place.lost:
        # The run rolls back: its other jobs, which wait for this entity's ghosts, stop too
        # (its own held-back push with them).
        return stop_jobs(state, msg.run_id, place, msg.refused or f"entity {entity} was lost")
    job = place.held_back.pop(entity, None)
    if job is None:
        return []
    return send_job(state, place, job, now)


def leave(state: PeerState, key: EntityKey, master: str, now: float) -> Effects:
    """The entity's job has ended its last step, and this holder decided to move it
    (``on_idle_thief``): it goes now, and the master records it."""
    to, gain = state.spmd.leaving.pop(key)
    run_id, entity = key
    held = state.spmd.held.get(key)
    if held is None or to == state.name or not alive(state, to) or not usable(state, to, run_id):
        return []
    state.note(INFO, __name__, "moving entity %d of %s to %s (gain %.3f)", entity, run_id, to, gain)
    notice = m.EntityLeaving(run_id, entity, to, gain, held.gen)
    # To the master first: the job's result, which follows on the same connection, must
    # find the move recorded, so that the next push waits for it.
    fx = (
        on_leaving(state, state.name, notice, now)
        if master == state.name
        else [Send(master, notice)]
    )
    return fx + ship(state, run_id, entity, to, now)


def on_leaving(state: PeerState, holder: str, msg: m.EntityLeaving, now: float) -> Effects:
    """Master: a holder moves one of its entities (it decided: its gain paid off). Record
    it; the entity's next push waits for the new holder's word."""
    place = state.spmd.runs.get(msg.run_id)
    entity = msg.entity
    if place is None:
        return []
    if msg.gen != place.gen or place.locator.get(entity) != holder or entity in place.moving:
        # An older generation's: a step that ended after a rollback placed the entity again
        # (the copy it shipped is stale), or a holder the entity was placed away from since.
        place.arrived.pop(entity, None)
        return []
    place.wanted.pop(entity, None)
    place.moving[entity] = msg.to
    if place.arrived.get(entity) == msg.to:  # the new holder's word came first
        del place.arrived[entity]
        return on_moved(state, msg.to, m.EntityMoved(msg.run_id, entity), now)
    if not alive(state, msg.to):
        return on_moved(state, msg.to, m.EntityMoved(msg.run_id, entity, f"{msg.to} is gone"), now)
    return [Timer(state.cfg.spmd.move_timeout_s, MoveTimeout(msg.run_id, entity, msg.to))]


def on_move(state: PeerState, sender: str, msg: m.EntityMove, now: float) -> Effects:
    """The master says: send this entity away (its step is over)."""
    run = state.runs.active.get(msg.run_id)
    if run is None or run.info.master != sender:
        return []  # not the run's master (any more): its locator is not the one that counts
    return ship(state, msg.run_id, msg.entity, msg.to, now)


def ship(state: PeerState, run_id: str, entity: int, to: str, now: float) -> Effects:
    """Send an entity to ``to`` (nowhere: drop it, the master placed it elsewhere since)."""
    spmd = state.spmd
    key = (run_id, entity)
    run = state.runs.active.get(run_id)
    spmd.leaving.pop(key, None)  # whatever this holder had decided for it is moot
    if not to:
        spmd.held.pop(key, None)
        spmd.tasks.pop(key, None)
        spmd.inbox.pop(key, None)
        return [Changed()] if state.draining else []
    held = spmd.held.get(key)
    master = run.info.master if run is not None else ""
    if held is None:
        refusal = m.EntityMoved(run_id, entity, f"{state.name} does not hold it")
        return to_master(state, master, refusal, now)
    try:
        data = codec.encode_value(held.state, state.cfg.net.max_frame_bytes // 2)
    except codec.EncodeError as exc:
        state.note(ERROR, __name__, "entity %d of %s cannot move: %s", entity, run_id, exc)
        return to_master(state, master, m.EntityMoved(run_id, entity, str(exc)), now)
    del spmd.held[key]
    ghosts = [
        m.GhostData(sender, gen, iteration, d)
        for (gen, iteration), box in sorted(spmd.inbox.pop(key, {}).items())
        for sender, d in sorted(box.items())
    ]
    spmd.tasks.pop(key, None)
    spmd.moved[key] = Departed(to, held.gen, held.sent)
    msg = m.EntityState(run_id, entity, held.gen, held.iteration, data, ghosts, held.cpu_s)
    if to == state.name:
        return on_state(state, state.name, msg, now)
    # A draining peer may leave once its last entity is gone (core/drain.py).
    return [Send(to, msg), *([Changed()] if state.draining else [])]


def to_master(state: PeerState, master: str, msg: m.EntityMoved, now: float) -> Effects:
    if master == state.name:
        return on_moved(state, state.name, msg, now)
    return [Send(master, msg)] if master else []


def on_state(state: PeerState, sender: str, msg: m.EntityState, now: float) -> Effects:
    """An entity moves here: install it, tell the master."""
    spmd = state.spmd
    key = (msg.run_id, msg.entity)
    run = state.runs.active.get(msg.run_id)
    if run is None:
        return []  # no master to tell (a run unknown here): the master's move times out
    try:
        value = codec.decode_value(msg.state)
    except codec.DecodeError as exc:
        state.note(
            ERROR, __name__, "entity %d of %s arrived unreadable: %s", msg.entity, msg.run_id, exc
        )
        refusal = m.EntityMoved(msg.run_id, msg.entity, f"unreadable at {state.name}: {exc}")
        return to_master(state, run.info.master, refusal, now)
    spmd.moved.pop(key, None)
    spmd.came_from[sender] = now
    held = Held(msg.gen, msg.iteration, value, size=len(msg.state))
    spmd.held[key] = held
    box = spmd.inbox.setdefault(key, {})
    for g in msg.ghosts:
        box.setdefault((g.gen, g.iteration), {})[g.sender] = g.data
    prune(spmd, key, (msg.gen, msg.iteration))
    moved = m.EntityMoved(msg.run_id, msg.entity, "", msg.gen)
    # A push for it may be here already (the master may hear of the move first): it starts
    # when its ghosts are in.
    return to_master(state, run.info.master, moved, now) + try_start(state, key)
