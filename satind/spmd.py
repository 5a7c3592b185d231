"""Iterative SPMD applications (mpi-ios-reconfigurable-iterative-apps): a fixed set of entities,
each with registered state, that step once per iteration and exchange data with their
neighbours in between. A plugin describes one with ``spmd_plugin``; satind places the entities
on members, carries the neighbours' data straight from holder to holder, and moves entities at
iteration boundaries when another member would run them better, or when their holder drains
or dies (core/spmd/). See docs/spmd.md and docs/plugins.md.

The answer must not depend on where entities ran: ``step`` must be a function of the entity's
state, its ghosts and the iteration alone — then a run that migrated entities gives the same
bits as a run that did not.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from satind.api import spawnable, sync
from satind.core.model.spmd import COLLECT, ENTITY_FNS, PLACE, STEP, EntityLost
from satind.engine import worker as _worker
from satind.net.codec import EncodeError, decode_value, encode_value
from satind.plugin import Plugin, driven
from satind.work.events import EntityInput
from satind.work.reports import BarrierPassed, EntityDone, SpmdIteration

# A generation's number: a new master's epoch comes first, so that its generations are newer
# than any its predecessor began (ghosts of older generations are dropped).
_GEN_PER_EPOCH = 1 << 20
# Each generation's entity jobs get paths of their own: the root's spawns start at gen x this.
# Paths are how results are matched to jobs, across masters too (orphans): a job of a new
# generation must never be taken for one of an older generation at the same place.
_SPAWNS_PER_GEN = 1 << 32


@dataclass(frozen=True)
class SpmdApp:
    """What ``drive`` and ``entity_job`` call (see ``spmd_plugin``)."""

    entities: Callable[[Any], int]
    neighbours: Callable[[Any, int], Sequence[int]]
    iterations: Callable[[Any], int]
    initial: Callable[[Any, int], Any]
    ghost: Callable[[Any, int, Any, int], Any]
    step: Callable[[Any, int, Any, dict[int, Any], int], Any]
    gather: Callable[[Any, list[Any]], Any]


# SPMD applications by plugin name: filled when their module is imported, on every peer.
APPS: dict[str, SpmdApp] = {}


def spmd_plugin(
    name: str,
    *,
    usage: str,
    parse: Callable[[Sequence[str]], Any],
    entities: Callable[[Any], int],
    neighbours: Callable[[Any, int], Sequence[int]],
    iterations: Callable[[Any], int],
    initial: Callable[[Any, int], Any],
    ghost: Callable[[Any, int, Any, int], Any],
    step: Callable[[Any, int, Any, dict[int, Any], int], Any],
    gather: Callable[[Any, list[Any]], Any],
    check: Callable[[Any, Any], None] | None = None,
    report: Callable[[Sequence[str], Any], Any] | None = None,
    description: str = "",
) -> Plugin:
    """Describe an SPMD application; the result is the module's ``PLUGIN``.

    Args:
        name: what users type after ``satind run``.
        usage: the argument synopsis.
        parse: command-line arguments -> the application's arguments (one value, passed to
            every function below as ``args``); raises ``UsageError``.
        entities: ``entities(args)`` -> how many entities (numbered from 0).
        neighbours: ``neighbours(args, e)`` -> the entities ``e`` exchanges data with; the
            relation must be symmetric.
        iterations: ``iterations(args)`` -> how many iterations the run makes.
        initial: ``initial(args, e)`` -> entity ``e``'s registered state before the first
            iteration: everything that must move when it moves (a CBOR value).
        ghost: ``ghost(args, e, state, n)`` -> what neighbour ``n`` needs of ``e``'s state
            for its next step (a CBOR value; heat2d: an edge row).
        step: ``step(args, e, state, ghosts, iteration)`` -> ``e``'s next state; ``ghosts``
            maps each neighbour to what its ``ghost`` gave for this iteration.
        gather: ``gather(args, states)`` -> the run's result from the final states, in
            entity order.
        check: optional ``check(args, result)``; raises when the answer is wrong.
        report: optional ``report(argv, result)`` -> what users see.
        description: one line for ``satind plugins``.
    """
    APPS[name] = SpmdApp(entities, neighbours, iterations, initial, ghost, step, gather)
    home = sys._getframe(1).f_globals.get("__name__", "")  # discovery looks in the caller
    return driven(name, drive, usage, parse, check, report, description, home, "spmd")


@spawnable
def entity_job(
    name: str,
    args: Any,
    entity: int,
    phase: int,
    iteration: int,
    gen: int,
    iterations: int,
    neighbours: list[int],
    count: int,
    restore: bytes | None,
) -> Any:
    """One entity job, on the entity's holder (core/spmd/ routes it there). Place: make
    (or restore) the entity and send its ghosts; step: the iterations from ``iteration`` to
    where the master ended the job's span (the holder runs this once per iteration); collect:
    its state. A step returns its last iteration's profile [CPU s, wall s, ghost bytes], its
    encoded state at a checkpoint (else None) and the iteration it reached."""
    app = APPS[name]
    w = _worker.CURRENT
    if w is None:  # outside satind (a test calling the function): nothing to keep
        raise RuntimeError("entity jobs run on satind peers only")
    run_id = w.current.run.run_id
    started, cpu0 = w.wall_clock(), w.cpu_clock()
    if phase == COLLECT:
        return _input(w, entity).state
    if phase == PLACE:
        state = decode_value(restore) if restore is not None else app.initial(args, entity)
        size = len(encode_value(state))
        _done(w, app, args, run_id, entity, gen, iteration, state, neighbours, 0.0, 0.0, size)
        return None
    given = _input(w, entity)
    # The job covers the iterations from ``iteration`` to its span's end; its holder runs
    # it once per iteration, each time with that iteration (core/spmd/ghosts.py).
    iteration = given.iteration
    ghosts = {n: decode_value(data) for n, data in given.ghosts.items()}
    state = app.step(args, entity, given.state, ghosts, iteration)
    cpu_s, wall_s = w.cpu_clock() - cpu0, w.wall_clock() - started
    # The state is encoded at checkpoints (and when it moves); on an entity's first step here
    # too, so that a step returning what cannot travel fails at once, not at the first move.
    checkpoint = given.checkpoint
    encoded = (
        _encoded(state, "step", entity, iteration) if checkpoint or not given.stepped else None
    )
    saved = encoded if checkpoint else None
    sent = _done(
        w,
        app,
        args,
        run_id,
        entity,
        gen,
        iteration + 1,
        state,
        neighbours,
        cpu_s,
        wall_s,
        len(encoded) if encoded is not None else 0,
    )
    return [cpu_s, wall_s, sent, saved, iteration + 1]


def _input(w: _worker.Worker, entity: int) -> EntityInput:
    """What the core handed over with this entity job (its state, its ghosts)."""
    given: EntityInput | None = w.entity_inputs.pop(w.current, None)
    if given is None:
        raise RuntimeError(f"entity {entity} has no state on this peer (it was not placed here)")
    return given


ENTITY_FNS.add(entity_job.fn)


def _done(
    w: _worker.Worker,
    app: SpmdApp,
    args: Any,
    run_id: str,
    entity: int,
    gen: int,
    iteration: int,
    state: Any,
    neighbours: list[int],
    cpu_s: float,
    wall_s: float,
    size: int,
) -> int:
    """Hand the entity's new state and its neighbours' ghosts to the network side."""
    ghosts = {
        n: _encoded(app.ghost(args, entity, state, n), "ghost", entity, iteration)
        for n in neighbours
    }
    w.hooks.report(EntityDone(run_id, entity, gen, iteration, state, ghosts, (cpu_s, wall_s, size)))
    return sum(len(g) for g in ghosts.values())


def _encoded(value: Any, made_by: str, entity: int, iteration: int) -> bytes:
    """``value`` encoded, or an error that says which function of the plugin made what
    cannot travel (the codec alone says what, not where it came from).

    Raises:
        EncodeError: ``value`` is not a CBOR value.
    """
    try:
        return encode_value(value)
    except EncodeError as exc:
        raise EncodeError(
            f"{made_by}() of entity {entity} (iteration {iteration}) returned what cannot "
            f"travel between peers: {exc}"
        ) from None


@spawnable
def drive(name: str, args: Any) -> Any:
    """The root of an SPMD run: place the entities, step them iteration after iteration,
    gather their states. From the last checkpoint when a holder died or a new master runs
    it again."""
    app = APPS[name]
    count = app.entities(args)
    total = app.iterations(args)
    neighbours = [sorted(set(app.neighbours(args, e))) for e in range(count)]
    _check_neighbours(neighbours)
    w = _worker.CURRENT
    run_id = w.current.run.run_id if w is not None else ""
    gen = (w.current.run.epoch if w is not None else 0) * _GEN_PER_EPOCH
    saved = w.current.run.resume_from if w is not None else None
    checkpoint: list[bytes] | None = None
    at = 0
    if w is not None and saved is not None:
        at, checkpoint = decode_value(saved)

    spawned = 0
    # A checkpoint passed and not yet reported: it is reported once the next phase's jobs are
    # pushed, so that its copies to every member (the whole plate's state) do not hold the
    # pushes back on the connections they share.
    passed: BarrierPassed | None = None

    def phase(kind: int, iteration: int, restore: list[bytes] | None) -> list[Any] | None:
        """Every entity's job of one phase; None when an entity was lost."""
        nonlocal spawned, passed
        spawned += count
        handles = [
            entity_job.push(
                name,
                args,
                e,
                kind,
                iteration,
                gen,
                total,
                neighbours[e],
                count,
                restore[e] if restore is not None else None,
            )
            for e in range(count)
        ]
        if passed is not None:
            assert w is not None  # a checkpoint is passed on a peer only
            w.hooks.report(passed)
            passed = None
        sync()
        results = []
        lost = False
        for h in handles:
            try:
                results.append(h.result())
            except EntityLost:
                lost = True
        return None if lost else results

    if w is None:
        return _sequential(app, args, count, total, neighbours)
    while True:  # each pass a generation: the first, or a rollback to the last checkpoint
        gen += 1
        iteration = at
        w.current.nspawn = gen * _SPAWNS_PER_GEN
        if phase(PLACE, iteration, checkpoint) is None:
            continue
        while iteration < total:
            # One push per entity covers several iterations (``spmd.push_every``, up to the
            # next checkpoint): the holders step on their own meanwhile.
            results = phase(STEP, iteration, None)
            if results is None:
                break
            iteration = results[0][4] if results else total  # no entities: nothing to step
            w.hooks.report(SpmdIteration(run_id, iteration, [r[:3] for r in results]))
            if all(r[3] is not None for r in results):
                at, checkpoint = iteration, [r[3] for r in results]
                passed = BarrierPassed(run_id, at, encode_value([at, checkpoint]))
        else:
            states = phase(COLLECT, iteration, None)
            if states is not None:
                w.current.nspawn = spawned  # what the run's statistics count as spawns
                return app.gather(args, states)


def _check_neighbours(neighbours: list[list[int]]) -> None:
    """Each entity waits for a ghost from each of its neighbours, and sends one to each: a
    relation that is not symmetric would make a step wait for ever. Said at once instead.

    Raises:
        ValueError: a neighbour out of range, an entity its own neighbour, or a one-way pair.
    """
    count = len(neighbours)
    for e, mine in enumerate(neighbours):
        for n in mine:
            if not 0 <= n < count or n == e:
                raise ValueError(
                    f"neighbours(args, {e}) names {n}: a neighbour must be another entity, "
                    f"from 0 to {count - 1}"
                )
            if e not in neighbours[n]:
                raise ValueError(
                    f"neighbours(args, {e}) names {n} but neighbours(args, {n}) does not name "
                    f"{e}: the relation must be symmetric (each sends the other its ghost)"
                )


def _sequential(
    app: SpmdApp, args: Any, count: int, total: int, neighbours: list[list[int]]
) -> Any:
    """The same run without satind (a plugin's function called outside a peer)."""
    states = [app.initial(args, e) for e in range(count)]
    for iteration in range(total):
        ghosts = [
            {n: app.ghost(args, n, states[n], e) for n in neighbours[e]} for e in range(count)
        ]
        states = [app.step(args, e, states[e], ghosts[e], iteration) for e in range(count)]
    return app.gather(args, states)
