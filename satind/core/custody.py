"""Custody of jobs that travel between peers: nothing a steal hands over may be lost.

A stolen job is in the custody of two peers. The **victim** records it as given (to whom,
since when) until its result is applied; the **thief** records it as taken until it has sent
the result, and then keeps the sent result for a while. Messages can be lost (a lossy link, a
partition, a connection reset), so the victim does not trust silence: every
``steal.custody_check_s`` it asks the thief about each job given that long ago and not
returned (``JobQuery``), and the thief answers from its records (``JobState``):

* "running": the thief has it (in its queue, computing, or stolen on): keep waiting;
* the thief finished it: it sends the result again (the first one was lost);
* "unknown": the steal reply never arrived (or the thief restarted): the victim takes the
  job back and runs it itself;
* "over": the thief knows the run as ended, and says how (the run's last announcement): a
  victim that missed the end (it was paused, or cut off) learns it here and stops, instead
  of taking the job back and handing it out again forever.

A job is named by (run id, path), and the same name can be given out twice: after a master was
lost, the new epoch respawns the same paths while the old epoch's copies may still be out. A
job computes the same value whatever its epoch, so a result completes every open record of its
name, each at most once; a late or duplicated result, or a job run twice, costs work but never
correctness.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from satind.core import kinds, sharing
from satind.core.effects import DEBUG, INFO, Effects, Link, Reply, Send, ToCompute
from satind.core.lifecycle import on_announces
from satind.core.model.orphans import Orphans
from satind.core.restart import restart_jobs_of
from satind.core.thief import finish_unparented
from satind.net import messages as m
from satind.net.codec import Encoded
from satind.work.errors import exception_from
from satind.work.events import ChildResult, JobArrived

if TYPE_CHECKING:
    from satind.core.state import PeerState


# -- handlers ---------------------------------------------------------------------------------


def on_job_result(state: PeerState, thief: str, msg: m.JobResult, now: float) -> Effects:
    """A thief sends the result of a job it took from us: apply it once to every record
    still open for it (a late or duplicated result finds none and is ignored), and tell the
    run's kind (an iterative task done, an SPMD step done: core/kinds.py)."""
    return _apply_result(state, thief, msg) + kinds.result_came(state, msg, thief, now)


def _apply_result(state: PeerState, thief: str, msg: m.JobResult) -> Effects:
    entries = state.custody.returned((msg.run_id, msg.path))
    if not entries:
        state.note(
            DEBUG, __name__, "ignoring result for %s%s from %s", msg.run_id, msg.path.hex(), thief
        )
        return []
    value: Any = None
    exc: BaseException | None = None
    if msg.error is not None:
        exc = exception_from(msg.error)
    elif msg.value is None:
        exc = RuntimeError(f"peer {thief} sent a result without a value or an error")
    else:
        value = Encoded(msg.value)  # decoded by the compute side, which runs plugin code
    fx: Effects = []
    for entry in entries:
        if entry.adopted:
            state.orphans.counters.results_reused += 1
        if entry.job.parent is None:
            # No local frame waits for it (a root, or work we stole and was stolen on): it
            # finishes here, so that a compute side busy in a long or stuck leaf does not
            # hold the result of another run hostage. It travels on with what its thief had
            # applied (this peer made no call for it).
            entry.job.needs = list(msg.needs)
            fx += finish_unparented(state, entry.job, value, exc)
        else:
            # Applied once the calls it needs are here too (core/sharing.py).
            fx.append(ToCompute(ChildResult(entry.job, value, exc, list(msg.needs), thief)))
    return fx


def on_job_query(state: PeerState, link: Link, msg: m.JobQuery) -> Effects:
    """A victim asks about a job it gave us: we run it, we finished it (the result again),
    we keep it as an orphan, the run is over here, or we never had it."""
    reply = state.custody.answer(msg, link.remote_name)
    held = state.held.values()
    if any(
        s.run_id == msg.run_id and s.path == msg.path and v == link.remote_name
        for specs in held
        for s, v in specs
    ):
        # Stolen before its shipped code was here: it waits for it (core/shipping.py).
        return [Reply(link, m.JobState(msg.run_id, msg.path, "running"))]
    if isinstance(reply, m.JobState) and reply.state == "unknown":
        kept = state.orphans.kept_result((msg.run_id, msg.path))
        end = state.runs.ended.get(msg.run_id)
        if kept is not None:
            reply = kept  # an orphan we keep: this is how its result is reused
        elif end is not None:
            reply = m.JobState(msg.run_id, msg.path, "over", end)
    return [Reply(link, reply)]


def on_job_state(state: PeerState, thief: str, msg: m.JobState, now: float) -> Effects:
    """A thief's answer about a job we gave it. "over" carries the run's end, which this
    peer missed: it applies it first (the run stops here too)."""
    fx: Effects = []
    if msg.state == "over" and msg.end is not None and msg.end.info.run_id == msg.run_id:
        fx += on_announces(state, [msg.end], now)
    for job in state.custody.on_state(msg, thief, now):
        state.note(
            INFO,
            __name__,
            "taking back %s%s: %s does not have it",
            msg.run_id,
            msg.path.hex(),
            thief,
        )
        # If its result was looked up in the orphan table, that tuple led nowhere: the job
        # is computed, not looked up again (forever).
        Orphans.forget(job.run, msg.path, thief)
        kind = kinds.of_job(job)
        if kind is not None and kind.taken_back is not None:
            fx += kind.taken_back(state, job, thief, now)  # pinned to a holder, or placed again
            continue
        fx.append(ToCompute(JobArrived(job)))
    return fx


def custody_tick(state: PeerState, now: float) -> Effects:
    """Every ``steal.custody_check_s``: ask the thieves of jobs given long ago and not
    returned; a thief that is gone meanwhile gets its jobs taken back (restart)."""
    fx: Effects = sharing.tick(state, now)
    every = state.cfg.steal.custody_check_s
    gone: set[str] = set()
    for (run_id, path), given in state.custody.overdue(now, every):
        if state.table.get(given.thief) is None or state.is_gone(given.thief):
            gone.add(given.thief)  # its death reached us before the job did
            continue
        fx.append(Send(given.thief, m.JobQuery(run_id, path)))
    for thief in sorted(gone):
        fx += restart_jobs_of(state, thief, "gone")
    return fx
