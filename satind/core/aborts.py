"""Abort across peers: the network side of speculative parallelism (satin-grid-programming-model
§4.3; the compute side is engine/speculation.py).

When a frame aborts its children, the ones not queued on its own peer are out on thieves.
For each, the victim drops its custody record (the child is never taken back, restarted or
waited for) and sends the thief an asynchronous ``Abort``: the aborting peer goes on at once,
whatever the latency. A thief that gets an ``Abort`` for a job it took from that victim:

* forgets it in custody (asked about it later, it says "unknown"; nobody asks: the victim
  forgot it first);
* drops it if it is still queued, or has the compute side cut it (``Cancel``): its frames
  unwind at their next spawn or sync and keep nothing — an aborted job is never restarted,
  never kept as an orphan, never logged;
* forwards the abort down its own custody: every job it gave out of that job's subtree gets
  an ``Abort`` too, and its thief does the same. The messages follow the spawn tree, point to
  point, as in Satin.

Until the compute side reports the job's frames gone (``dropped``), the job stays in
``PeerState.cancelled``: a steal request does not hand out work of its subtree, and if it
finished before the cut reached it, its result is not sent.

Best effort, as in the paper: an ``Abort`` lost, or racing the steal reply that carries its
job, costs the job's work; its result then reaches a victim that has no record of it any
more and ignores it. Abort composes with crashes: a thief that dies after the abort leaves
nothing to restart (the records went first), and a child taken back from a thief that died
before arrives at a frame that aborted it, which drops it (``speculation.is_aborted``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from satind.core import kinds
from satind.core.effects import DEBUG, Changed, Effects, Send, ToCompute
from satind.net import messages as m
from satind.work.errors import aborted
from satind.work.events import Cancel
from satind.work.jobs import Job, root_of

if TYPE_CHECKING:
    from satind.core.state import PeerState


def children_aborted(state: PeerState, frame: Job) -> Effects:
    """The compute side aborted ``frame``'s children: tell the thieves of those that are out
    (hook ``children_aborted``)."""
    return _forward(state, lambda job: job.parent is frame)


def on_abort(state: PeerState, victim: str, msg: m.Abort) -> Effects:
    """``victim`` aborted a job it gave us."""
    key = (msg.run_id, msg.path)
    jobs = state.custody.taken.pop((key, victim), [])
    for code_hash, waiting in list(state.held.items()):
        # Still waiting for its run's shipped code (core/shipping.py): never taken now.
        kept = [(s, v) for s, v in waiting if (s.run_id, s.path, v) != (*key, victim)]
        if len(kept) < len(waiting):
            state.held[code_hash] = kept
    fx: Effects = []
    for job in jobs:
        state.note(DEBUG, __name__, "%s aborted %s%s", victim, msg.run_id, msg.path.hex())
        if kinds.dropped_unstarted(state, job):
            continue  # e.g. an SPMD entity job waiting for its ghosts: never started
        if state.queue.remove(job):
            job.exc = aborted()  # not started: gone now
            job.run.jobs_cancelled += 1
        else:
            state.cancelled.add(job)
            fx.append(ToCompute(Cancel(job)))
        fx += _forward(state, _in_subtree(job))
    if jobs and state.draining:
        fx.append(Changed())  # a drain may wait for these
    return fx


def dropped(state: PeerState, job: Job) -> bool:
    """The compute side unwound (or dropped) a cancelled job: True if it was one."""
    if job in state.cancelled:
        state.cancelled.discard(job)
        return True
    return False


def cancelled_here(state: PeerState, job: Job) -> bool:
    """Whether ``job`` lies in a job that was aborted here and is being unwound (it must not
    be handed out, nor its result sent)."""
    return bool(state.cancelled) and root_of(job) in state.cancelled


def _in_subtree(root: Job) -> Callable[[Job], bool]:
    return lambda job: root_of(job) is root


def _forward(state: PeerState, matches: Callable[[Job], bool]) -> Effects:
    """An ``Abort`` to the thief of every job given out that ``matches``; their custody records
    go. A record that fetches an orphan's kept result (``adopted``) just goes: the holder's
    answer will find no record."""
    fx: Effects = []
    for (run_id, path), given in state.custody.drop_given(matches):
        if not given.adopted:
            state.abort_messages += 1
            fx.append(Send(given.thief, m.Abort(run_id, path)))
    return fx
