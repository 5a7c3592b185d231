"""What a holder's crash does to an SPMD run (the story: core/spmd/__init__.py): the entity
jobs of its runs fail with EntityLost and the root rolls the whole run back to its last
checkpoint in a new generation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from satind.core.effects import INFO, Effects, Send, ToCompute
from satind.core.model.spmd import (
    EntityLost,
    Placement,
)
from satind.core.spmd.ghosts import arrive as arrive
from satind.core.spmd.ghosts import drop_waiting
from satind.core.spmd.ghosts import on_ghost as on_ghost
from satind.core.spmd.ghosts import on_ghost_request as on_ghost_request
from satind.core.spmd.ghosts import on_push as on_push
from satind.core.spmd.placement import alive
from satind.core.spmd.placement import offer as offer
from satind.core.spmd.placement import placement as placement
from satind.core.spmd.placement import profile as profile
from satind.net import messages as m
from satind.work.events import ChildResult
from satind.work.jobs import Job

if TYPE_CHECKING:
    from satind.core.state import PeerState


def lost_job(state: PeerState, job: Job) -> Effects:
    """An entity job whose holder died (custody gave it back): it fails."""
    place = state.spmd.runs.get(job.run.run_id)
    entity = job.args[2]
    fx: Effects = [ToCompute(ChildResult(job, None, EntityLost("its holder died")))]
    if place is not None and place.jobs.get(entity) is job:
        del place.jobs[entity]
        place.by_path.pop(job.path, None)
        place.lost.add(entity)
        # The others wait for its ghosts: they stop, and the root rolls back.
        fx += stop_jobs(state, job.run.run_id, place, f"entity {entity} was lost")
    return fx


def member_gone(state: PeerState, name: str) -> Effects:
    """A member died: its entities are lost; every unfinished entity job of those runs fails
    (they may wait for ghosts that will never come), and the root rolls back."""
    fx: Effects = []
    for run_id, place in state.spmd.runs.items():
        lost = {e for e, h in place.locator.items() if h == name}
        lost |= {e for e, h in place.moving.items() if h == name}
        if not lost:
            continue
        state.note(INFO, __name__, "%s lost entities %s of %s", name, sorted(lost), run_id)
        state.spmd.counters.rollbacks += 1
        place.lost |= lost
        for entity in lost:
            place.moving.pop(entity, None)
        place.wanted.clear()
        fx += stop_jobs(state, run_id, place, f"{name} died")
    return fx


def stop_jobs(state: PeerState, run_id: str, place: Placement, why: str) -> Effects:
    """Every unfinished entity job of the run fails with ``EntityLost(why)``: a holder died,
    or an entity's step failed. The others' steps may wait for ghosts that will never come
    (a job covers several iterations, each waiting for its neighbours' last one), and the
    root waits for every job of the push."""
    fx: Effects = []
    for entity, job in list(place.jobs.items()):
        holder = place.locator.get(entity, "")
        if holder == state.name:
            if not drop_waiting(state, job):
                continue  # running here its last step: it has its ghosts and ends by itself
        else:
            key = (run_id, job.path)
            if not state.custody.drop_given(lambda j, job=job: j is job):  # type: ignore[misc]
                continue  # already given back (its holder is the dead one)
            place.by_path.pop(job.path, None)
            if alive(state, holder):
                fx.append(Send(holder, m.Abort(key[0], key[1])))
        del place.jobs[entity]
        fx.append(ToCompute(ChildResult(job, None, EntityLost(why))))
    for entity, job in list(place.held_back.items()):  # pushes waiting for a move's end
        del place.held_back[entity]
        fx.append(ToCompute(ChildResult(job, None, EntityLost(why))))
    return fx


def step_failed(state: PeerState, run_id: str, entity: int) -> Effects:
    """Master: an entity's job failed (its step, or its ``ghost``, raised): its run fails
    with that error; the other jobs of the push are stopped, since their next steps would
    wait for the failed entity's ghosts for ever."""
    place = state.spmd.runs.get(run_id)
    if place is None:
        return []
    place.jobs.pop(entity, None)
    return stop_jobs(state, run_id, place, f"entity {entity} failed")
