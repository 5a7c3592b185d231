"""Orphan saving (satin-fault-tolerance-malleability-migration §3.2, §3.3, §3.5).

An **orphan** is a finished result whose owner is gone: the result of a job stolen from a peer
that died or left (or from a master that was replaced), which has nowhere to go. Instead of
discarding it, the peer that holds it **keeps** it and announces a (run, path, holder)
**tuple** by gossip, where tuples are combined with everything else a gossip message carries.
Every peer files the tuples in its orphan **table**. When a job is spawned (in practice: by a
restarted job, or by a new master's respawned root) and its path is in the table, it is not
run: it is recorded as stolen by the holder, whose kept result comes back when asked (the
custody query) — the computation tree is re-linked around the lost peer.

A tuple is only an optimisation: a lost tuple, or a holder that is gone too, costs the
recomputation of that job, never correctness (custody answers "unknown" and the job runs).

The table the compute thread reads at every spawn is ``RunState.orphans``: None while a run has
no tuple, so a spawn pays one attribute read when nothing is orphaned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from satind.core.effects import Effects, Log, Send, Spread, ToCompute
from satind.core.model.orphans import Orphans
from satind.net import messages as m
from satind.net.codec import Encoded
from satind.work.events import ChildResult, JobArrived
from satind.work.jobs import Job

if TYPE_CHECKING:
    from satind.core.state import PeerState


# -- handlers ---------------------------------------------------------------------------------


def keep_orphan(state: PeerState, result: m.JobResult) -> Effects:
    """Keep a result whose owner is gone, log it, and announce it to everyone (a tuple)."""
    run = state.runs.active.get(result.run_id)
    if run is None or not state.orphans.keep(result):
        return []
    item = m.OrphanTuple(result.run_id, result.path, state.name)
    Orphans.file(run.state, item)
    state.orphans.counters.tuples_sent += 1
    return [Log("result", result), Spread(item)]


def keep_finished(state: PeerState, job: Job, value: bytes) -> Effects:
    """The compute side aborted an orphan frame and found this finished child below it."""
    needs = list(getattr(job, "needs", ()))
    return keep_orphan(state, m.JobResult(job.run.run_id, job.path, value, None, needs))


def on_tuples(state: PeerState, tuples: Sequence[m.OrphanTuple]) -> Effects:
    """Tuples a holder announced (to every member it knows: node/announce.py), or a joiner's
    table: file what is new. Not spread on: the holder's announcement reached everyone it
    knew, and a member it did not know gets the table with its first steals."""
    if not state.cfg.ft.orphans:
        return []
    if tuples:
        # Announced to it as a member: it has the table from now on (a member's steals need
        # not fetch it again after a crash; a joiner's first ones do, core/victim.py).
        state.needs_orphans = False
    for item in tuples:
        if state.is_gone(item.holder):
            continue  # late news of a holder that is gone: it leads nowhere
        run = state.runs.active.get(item.run_id)
        if run is not None and Orphans.file(run.state, item):
            state.orphans.counters.tuples_received += 1
    return []


# Empty tables a joiner takes as "there are no orphans" (each could come from a victim that
# is new itself); announcements bring it any tuple made later.
EMPTY_TABLES = 3


def got_table(state: PeerState, tuples: list[m.OrphanTuple]) -> Effects:
    """A victim answered a joiner's steal with its orphan table (§3.5); the rest of a big
    one follows as gossip messages (core/victim.py). One empty table does not end the asking: that
    victim may know of no orphan while others do; a few do."""
    state.empty_tables += 0 if tuples else 1
    if tuples or state.empty_tables >= EMPTY_TABLES:
        state.needs_orphans = False
    return on_tuples(state, tuples)


def fetch_orphan(state: PeerState, job: Job, holder: str, now: float) -> Effects:
    """A spawned job whose result ``holder`` keeps: record it as stolen by the holder and
    ask for the result (the custody query; "unknown" puts the job back in our queue)."""
    key = (job.run.run_id, job.path)
    member = state.table.get(holder)
    if holder != state.name and (member is None or not member.alive):
        # Its holder is gone: compute it after all (and do not look it up again).
        Orphans.forget(job.run, job.path, holder)
        return [ToCompute(JobArrived(job))]
    if holder == state.name:
        kept = state.orphans.kept_result(key)
        if kept is not None and kept.value is not None:
            state.orphans.counters.results_reused += 1
            # With what its thief had applied: a result handed over by a draining peer may
            # come before its calls (it waits for them a while, core/sharing.py).
            return [ToCompute(ChildResult(job, Encoded(kept.value), None, list(kept.needs)))]
        Orphans.forget(job.run, job.path, holder)
        return [ToCompute(JobArrived(job))]
    state.custody.give(key, job, holder, now, adopted=True)
    return [Send(holder, m.JobQuery(key[0], key[1]))]
