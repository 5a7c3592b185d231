"""Reconfigurable iterative SPMD runs (mpi-ios-reconfigurable-iterative-apps; the plugin side
is satind/spmd.py, the gain satind/reconfig/gain.py). docs/spmd.md tells the whole story.

An SPMD run is a fixed set of **entities** (the paper's MPI processes), each with registered
state (what must move when it moves: PCM's registration), that step once per iteration and
exchange data with their neighbours in between (ghost rows). The run's root, on the master,
pushes each iteration's entity jobs; this module does the rest:

* **Master: the locator and the pushes.** Each entity lives on one member
  (``Placement.locator``). An entity job goes to its holder (``TaskPush`` with an
  ``EntityTask`` naming the holders of its neighbours), never to a heuristic's choice and
  never to a thief. Entities are first spread evenly over the usable members, the master
  included. A step job spans several iterations (``spmd.push_every``, ending at the next
  checkpoint or the run's end: ``EntityTask.until``), so the master is in the loop once per
  span, not once per iteration.
* **Holder: registered state, steps and ghosts.** A holder keeps each entity's state between
  iterations (``Held``, shared with the compute side). It steps the entity through its span
  on its own: each step starts as soon as the ghosts of its iteration are in, as a job of its
  own whose end the holder takes (ghosts.py); the span's last step is the pushed job, whose
  result goes to the master. At the end of a step the compute side hands over the new state
  and the data for each neighbour; the data goes straight to the neighbour's holder
  (``Ghost``), not through the master. A holder an entity left forwards late ghosts.
* **Reconfiguration: the holders decide.** An idle peer's steal requests carry its resource
  profile (the CPU share one more entity would get there). A holder that gets one and has
  nothing to give weighs each of its entities with the gain Γ (§5): the CPU and the network
  the entity uses here against what it would get there, minus the migration's cost over its
  remaining life. When Γ > ``spmd.min_gain`` it moves the best one itself when the entity's
  span ends (moves.py: ``EntityLeaving`` to the master, which only records it and holds the
  entity's next push back; the state to the new holder in ``EntityState``; ``EntityMoved``
  from it to the master). A draining holder asks the master to move all its entities
  anywhere (``MigrateRequest``; the master picks where), and does not leave before they are
  gone.
* **Crashes.** Every ``spmd.checkpoint_every`` iterations the steps return their registered
  state, and the root passes a barrier with all of it (to every member, so that a new master
  resumes from it). When a holder dies, every unfinished entity job of its runs fails with
  ``EntityLost`` and the root rolls the whole run back to that checkpoint in a new generation
  (ghosts of older generations are dropped); the lost entities go to other members.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from satind.core import kinds
from satind.core.effects import INFO, Effects, Send, ToCompute
from satind.core.model.spmd import (
    PLACE,
    STEP,
    EntityKey,
    EntityLost,
    Held,
    Placement,
    is_entity_job,
)
from satind.core.spmd import ghosts
from satind.core.spmd.ghosts import arrive as arrive
from satind.core.spmd.ghosts import deliver, drop_waiting, prune, try_start
from satind.core.spmd.ghosts import ghosts_again as ghosts_again
from satind.core.spmd.ghosts import on_ghost as on_ghost
from satind.core.spmd.ghosts import on_ghost_request as on_ghost_request
from satind.core.spmd.ghosts import on_push as on_push
from satind.core.spmd.moves import leave, maybe_move, send_job
from satind.core.spmd.moves import move_timeout as move_timeout
from satind.core.spmd.moves import on_leaving as on_leaving
from satind.core.spmd.moves import on_migrate_request as on_migrate_request
from satind.core.spmd.moves import on_move as on_move
from satind.core.spmd.moves import on_moved as on_moved
from satind.core.spmd.moves import on_state as on_state
from satind.core.spmd.moves import segment_end as segment_end
from satind.core.spmd.moves import ship as ship
from satind.core.spmd.placement import alive, forget_run, holds_entities, least_loaded, usable
from satind.core.spmd.placement import offer as offer
from satind.core.spmd.placement import placement as placement
from satind.core.spmd.placement import profile as profile
from satind.core.spmd.rollback import lost_job as lost_job
from satind.core.spmd.rollback import member_gone as member_gone
from satind.core.spmd.rollback import step_failed, stop_jobs
from satind.net import messages as m
from satind.reconfig.gain import comm_s, entity_gain
from satind.work.events import ChildResult
from satind.work.jobs import Job

if TYPE_CHECKING:
    from satind.core.state import PeerState


# -- the master: placing entity jobs --------------------------------------------------------


def task_ready(state: PeerState, job: Job, now: float) -> Effects:
    """Hook ``task_ready`` for an entity job: to the entity's holder."""
    job.run.pushed = True
    run_id = job.run.run_id
    if job.run.aborted or run_id not in state.runs.active:
        return []  # the run is over here: nobody waits for the job
    entity, phase, _, gen, iterations, _, count = job.args[2:9]
    place = state.spmd.runs.setdefault(run_id, Placement())
    place.iterations = iterations
    if phase == PLACE and gen != place.gen:
        # A new generation (the run's start, or a rollback): every entity gets a holder
        # before any is placed, so that each knows where its neighbours are.
        place.gen = gen
        place.lost.clear()
        place.wanted.clear()
        place.arrived.clear()
        for e in range(count):
            holder = place.locator.get(e)
            if holder is None or not usable(state, holder, run_id):
                place.locator.pop(e, None)
                place.locator[e] = least_loaded(state, run_id, place, exclude="")
    holder = place.locator.get(entity)
    if place.lost or holder is None or not alive(state, holder):
        # An entity of this generation is lost: the run rolls back, so no job of it may go
        # out (its steps would wait for ever for the lost one's ghosts, and the root with
        # them), and those out already stop.
        place.lost.add(entity)
        why = f"entity {entity} was lost"
        lost = ToCompute(ChildResult(job, None, EntityLost(why)))
        return [lost, *stop_jobs(state, run_id, place, why)]
    if entity in place.moving:
        place.held_back[entity] = job
        return []
    return send_job(state, place, job, now)


def finished(state: PeerState, msg: m.JobResult, now: float) -> Effects:
    """The result of an entity job came (custody applies it): its steps are over, so a move
    asked for can happen now. A failed one fails its run: the others stop."""
    place = state.spmd.runs.get(msg.run_id)
    if place is None:
        return []
    entity = place.by_path.pop(msg.path, None)
    job = place.jobs.get(entity) if entity is not None else None
    if entity is None or job is None or job.path != msg.path:
        return []
    del place.jobs[entity]
    if msg.error is not None:
        return step_failed(state, msg.run_id, entity)
    return maybe_move(state, msg.run_id, place, entity, now)


def step_finished(state: PeerState, step: Job, now: float) -> Effects | None:
    """A job the compute side finished: a step inside an entity job's span goes on here
    (core/spmd/ghosts.py); None: not one of those. When the master holds the entity and the
    step failed, the run's other jobs stop (as ``finished`` does for a remote holder's)."""
    entry = state.spmd.stepping.get(step)
    fx = ghosts.step_finished(state, step, now)
    if fx is not None and entry is not None and step.error is not None:
        (run_id, entity), job, task = entry
        if job.parent is not None and task.phase >= 0:
            fx += step_failed(state, run_id, entity)
    return fx


# -- the holder --------------------------------------------------------------------------------


def entity_done(
    state: PeerState,
    run_id: str,
    entity: int,
    gen: int,
    iteration: int,
    value: Any,
    ghosts: dict[int, bytes],
    measured: tuple[float, float, int],
    now: float,
) -> Effects:
    """Hook from the compute side: an entity's state as of the start of ``iteration`` (after
    its place or its step), with the data for its neighbours, and what the step cost
    (CPU seconds, wall seconds, state bytes or 0 when not measured)."""
    spmd = state.spmd
    key = (run_id, entity)
    held = spmd.held.get(key)
    cpu_s, wall_s, size = measured
    if run_id not in state.runs.active or (held is not None and gen < held.gen):
        return []  # the run ended here meanwhile, or a step of an older generation ended
    if held is None or held.gen != gen:
        held = Held(gen, iteration, value)
        spmd.held[key] = held
        prune(spmd, key, (gen, iteration))
    else:
        if held.stepped_at is not None and iteration == held.iteration + 1:
            held.period_s = _mean(held.period_s, now - held.stepped_at)
        held.cpu_s = _mean(held.cpu_s, cpu_s) if wall_s > 0 else held.cpu_s
        held.wall_s = _mean(held.wall_s, wall_s) if wall_s > 0 else held.wall_s
        held.iteration, held.state = iteration, value
    held.stepped_at = now
    held.ready = {}
    if size:
        held.size = size
    spmd.moved.pop(key, None)
    task = spmd.tasks.get(key)
    fx: Effects = []
    sent = 0
    if task is not None:
        where = dict(zip(task.neighbours, task.holders, strict=False))
        for neighbour, data in sorted(ghosts.items()):
            ghost = m.GhostData(entity, gen, iteration, data)
            sent += len(data)
            fx += deliver(state, run_id, neighbour, ghost, where.get(neighbour, ""))
    held.bytes_out = sent
    held.sent[(gen, iteration)] = dict(ghosts)
    for tag in sorted(held.sent)[:-2]:
        del held.sent[tag]
    spmd.counters.ghosts_sent += len(ghosts)
    spmd.counters.ghost_bytes += sent
    fx += try_start(state, key)
    run = state.runs.active.get(run_id)
    master = run.info.master if run is not None else ""
    # Its job ended here: its place, or the last step of its span.
    job_over = task is None or iteration >= task.until
    if master == state.name and job_over:
        # The master's own entity ended its job (its place, or the last step of its span):
        # a move asked for may happen now.
        place = spmd.runs.get(run_id)
        mine = place is not None and place.locator.get(entity) == state.name
        if place is not None and mine and place.jobs.pop(entity, None) is not None:
            fx += maybe_move(state, run_id, place, entity, now)
    if state.draining:
        fx += _leave_request(state, key, master, now)
    elif key in spmd.leaving and job_over and task is not None and task.phase == STEP:
        fx += leave(state, key, master, now)
    return fx


def _mean(old: float, new: float) -> float:
    """An exponential mean over the last few iterations: it follows a change of load within
    a few iterations and smooths the noise of single ones."""
    return new if old <= 0 else 0.7 * old + 0.3 * new


def on_idle_thief(state: PeerState, thief: str, cpu: float, now: float) -> Effects:
    """A steal request we could not serve, with the thief's resource profile: would one of
    our entities do better there? (IOS's work-stealing trigger, §3 and §5.)"""
    cfg = state.cfg.spmd
    spmd = state.spmd
    if cpu < 0 or not cfg.migrate or state.draining or not spmd.held:
        return []
    if now - spmd.proposed.get(thief, float("-inf")) < cfg.propose_wait_s:
        return []
    if now - spmd.came_from.get(thief, float("-inf")) < cfg.settle_s:
        return []
    # This peer's speed (CPU seconds per wall second of its steps) and each entity's part of
    # its stepping time: an entity uses speed x part of a CPU here.
    busy = sum(h.wall_s for h in spmd.held.values())
    speed = min(sum(h.cpu_s for h in spmd.held.values()) / busy, 1.0) if busy > 0 else 0.0
    me, rtt, measured = state.name, state.table.rtt_s, state.table.bandwidth

    def link(at: str, to: str) -> str:
        # The member whose link from here stands for the link at-to: what is measured is
        # from here (SWIM's probes, large frames); from the thief, to us as from us to it,
        # and to a third member as from here.
        return thief if at != me and to == me else to

    def one_way(at: str, to: str) -> float:
        return rtt.get(link(at, to), 0.0) / 2  # not measured: nothing

    def bandwidth(at: str, to: str) -> float:
        return measured.get(link(at, to), cfg.bandwidth_bytes_s)  # not measured: configured

    best: tuple[float, EntityKey] | None = None
    why = ""
    for key, held in spmd.held.items():
        task = spmd.tasks.get(key)
        if (
            now - held.proposed_at < cfg.propose_wait_s
            or held.wall_s <= 0
            or busy <= 0
            or task is None
            or key in spmd.leaving
            or not usable(state, thief, key[0])
        ):
            continue
        used = speed * held.wall_s / busy
        life = max(task.iterations - held.iteration, 0) * held.period_s
        cost = cfg.migration_latency_s + held.size / bandwidth(me, thief)
        each = held.bytes_out / max(len(task.holders), 1)
        here = comm_s(me, task.holders, one_way, each, bandwidth)
        there = comm_s(thief, task.holders, one_way, each, bandwidth)
        decision = entity_gain(used, cpu, held.wall_s, here, there, cost, life, cfg.log_base)
        if decision.gain > cfg.min_gain and (best is None or decision.gain > best[0]):
            best = (decision.gain, key)
            why = f"uses {used:.3f} here, {cpu:.3f} there, cost {decision.cost:.4f}"
    if best is None:
        return []
    value, (run_id, entity) = best
    spmd.proposed[thief] = now
    spmd.held[(run_id, entity)].proposed_at = now
    spmd.counters.migrations_proposed += 1
    state.note(
        INFO,
        __name__,
        "entity %d of %s goes to %s at the end of its job: gain %.3f (%s)",
        entity,
        run_id,
        thief,
        value,
        why,
    )
    # The holder decides and moves (IOS's agents are peer to peer); the master only records
    # the new holder (``_leave``, ``on_leaving``).
    spmd.leaving[(run_id, entity)] = (thief, value)
    return []


def _leave_request(state: PeerState, key: EntityKey, master: str, now: float) -> Effects:
    held = state.spmd.held.get(key)
    if held is None or not master or now - held.proposed_at < state.cfg.spmd.propose_wait_s:
        return []
    held.proposed_at = now
    msg = m.MigrateRequest(key[0], key[1], "", 0.0)
    if master == state.name:
        return on_migrate_request(state, state.name, msg, now)
    return [Send(master, msg)]


def drain_requests(state: PeerState, now: float) -> Effects:
    """Draining: every entity here asks to go (the master moves each after its step)."""
    fx: Effects = []
    for key in list(state.spmd.held):
        run = state.runs.active.get(key[0])
        if run is not None:
            fx += _leave_request(state, key, run.info.master, now)
    return fx


kinds.register(
    kinds.KindRules(
        "spmd",
        owns=is_entity_job,
        lost=lambda state, job, thief, why: lost_job(state, job),
        taken_back=lambda state, job, thief, now: lost_job(state, job),
        drop_unstarted=drop_waiting,
        member_gone=member_gone,
        idle_thief=on_idle_thief,
        draining=drain_requests,
        holds_work=holds_entities,
        forget_run=forget_run,
        # Ghosts that came before the run was known here.
        forget_unknown=forget_run,
        task_ready=task_ready,
        result=lambda state, msg, thief, now: (
            finished(state, msg, now) if msg.run_id in state.spmd.runs else []
        ),
    )
)
