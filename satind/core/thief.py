"""The thief's side of a steal: take a stolen job in, and send its result back.

The steal rounds themselves (whom to ask, when, how often) are ``core/stealing.py``'s pure
decisions, run by the node's steal loop (``node/thief.py``). This module is what happens to
what a round brings: ``accept_stolen`` turns a ``JobSpec`` into a local job the compute side
runs (its arguments still encoded: the compute side decodes them), recorded in custody as
taken; ``job_finished`` sends the result of a job without a local parent back to its
victim — or keeps it as an orphan when the victim is gone (satin-fault-tolerance §3.2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from satind.core import aborts, sharing
from satind.core.effects import DEBUG, ERROR, WARNING, Changed, Effects, Log, Send, Task
from satind.core.lifecycle import register
from satind.core.orphans import keep_orphan
from satind.net import messages as m
from satind.net.codec import Encoded
from satind.work.errors import error_info
from satind.work.jobs import Job, path_indices
from satind.work.spawnables import lookup as lookup_spawnable

if TYPE_CHECKING:
    from satind.core.state import PeerState


def take(state: PeerState, spec: m.JobSpec, victim: str, now: float) -> tuple[bool, Effects]:
    """A steal reply brought a job: accepted (False when it cannot run here), and sent to the
    compute side now, or once the replicas of its shared objects are here (core/sharing.py)."""
    job, fx = accept_stolen(state, spec, victim)
    if job is None:
        return False, fx
    return True, fx + sharing.arrive(state, job, spec.shared, victim, now)


def accept_stolen(state: PeerState, spec: m.JobSpec, victim: str) -> tuple[Job | None, Effects]:
    """Build the local record of a job stolen from ``victim``. None when it cannot run here:
    its run is over (a late reply: nobody waits for it), or this peer cannot run it (the
    victim is told why, as the job's error)."""
    stub = m.RunInfo(
        spec.run_id,
        spec.plugin,
        spec.code_hash,
        [],
        b"",
        spec.master,
        spec.branching,
        spec.epoch,
        shipped=spec.shipped,
    )
    run, fx = register(state, stub)
    if run is None:
        return None, fx
    if run.plugin is None and run.refused is None:
        # Its shipped code is coming: the job waits for it here (core/shipping.py).
        state.held.setdefault(spec.code_hash, []).append((spec, victim))
        return None, fx
    if run.refused is not None:
        # This peer takes no part in the run (a plugin or a requirement it lacks, shipped
        # code it does not accept or could not get): the victim takes the job back ("unknown"
        # to custody) and runs it; the run goes on without this peer.
        state.note(
            WARNING,
            __name__,
            "gave back a job of run %s to %s: %s",
            spec.run_id,
            victim,
            run.refused,
        )
        return None, [*fx, Send(victim, m.JobState(spec.run_id, spec.path, "unknown"))]
    error: BaseException | None = None
    spawnable = lookup_spawnable(spec.fn)
    if spawnable is None:
        error = LookupError(
            f"peer {state.name} has no spawnable function {spec.fn} (plugin {spec.plugin})"
        )
    if error is not None or spawnable is None:
        assert error is not None
        state.note(ERROR, __name__, "cannot run job stolen from %s: %s", victim, error)
        return None, [
            *fx,
            Send(victim, m.JobResult(spec.run_id, spec.path, None, error_info(error))),
        ]
    depth = len(path_indices(spec.path))
    # The arguments stay encoded: the compute side decodes them before it runs the job.
    args: Any = Encoded(spec.args)
    job = Job(spawnable.fn, args, None, 0, run.state, run.state.inv_branching**depth)
    job.set_path(spec.path)
    job.origin = victim
    if spec.pushed:
        # An iterative run's task (core/iterative.py), also one that waited for the run's
        # shipped code: its run's jobs here are never stolen on.
        run.state.pushed = True
    state.custody.take((spec.run_id, spec.path), victim, job)
    state.note(DEBUG, __name__, "took %s%s from %s", spec.run_id, spec.path.hex(), victim)
    return job, fx


def result_message(job: Job) -> m.JobResult:
    """A finished job's result for the wire: its encoded value, or the error it raised, and
    the global calls it must not overtake (``Job.needs``, set by the compute side)."""
    exc = job.error
    needs = list(getattr(job, "needs", ()))
    if exc is None and isinstance(job.value, Encoded):
        return m.JobResult(job.run.run_id, job.path, job.value.data, None, needs)
    if exc is None:
        exc = RuntimeError(f"job {job!r} finished without an encoded value")
    return m.JobResult(job.run.run_id, job.path, None, error_info(exc), needs)


def job_finished(state: PeerState, job: Job) -> Effects:
    """A job without a local parent finished: a root (its run ends: the master gathers the
    statistics first), or a stolen job (its result goes back to the victim)."""

    # A draining peer may have waited for this one (core/drain.py).
    fx: Effects = [Changed()] if state.draining else []
    if aborts.dropped(state, job):
        return fx  # its victim aborted it before the cut reached it: nobody wants it
    if job.origin is None:
        run = state.runs.active.get(job.run.run_id)
        if run is None or run.root is not job:
            state.note(WARNING, __name__, "finished root of unknown run %s", job.run.run_id)
            return fx
        return [*fx, Task("finish_run", job.run.run_id)]
    state.sharing.refs.pop(job, None)
    # The global calls made here go before the result (core/sharing.py, "results wait for
    # their calls"): on the same connection, so the victim applies them first.
    fx += sharing.flush(state)
    msg = result_message(job)
    state.custody.finished((job.run.run_id, job.path), job.origin, msg)
    if state.is_gone(job.origin) and state.cfg.ft.orphans:
        # Its owner is gone: an orphan. Keep the result for whoever recomputes (§3.2).
        return fx + keep_orphan(state, msg)
    state.note(
        DEBUG, __name__, "sending result of %s%s to %s", job.run.run_id, job.path.hex(), job.origin
    )
    # The log gets what a resume after a total loss would need.
    return [*fx, Log("result", msg), Send(job.origin, msg)]


def finish_unparented(state: PeerState, job: Job, value: Any, exc: BaseException | None) -> Effects:
    """A parentless job we gave away came back: apply its result at most once, here on the
    network side (the compute side no longer holds a job a thief took from its queue)."""
    if job.done:
        return []
    if exc is not None:
        job.exc = exc
    else:
        job.value = value  # still encoded: it travels on as it came
    return job_finished(state, job)
