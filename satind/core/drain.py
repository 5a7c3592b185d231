"""Graceful drain: a peer leaves without losing anything (satin-fault-tolerance §3.3).

A draining peer stops stealing and taking runs, tells everyone it is draining (others may
still steal from it), and finishes what it holds: every frame, including ones that wait in a
sync for children other peers compute, so that its results reach their owners; and every job
it took and passed on to a thief, whose result comes back through it. Then it sends each run's
master its share of the run's counters (it will not be there to be asked when the run ends),
hands the results it keeps to a peer that stays — which announces them under its own name —
and leaves; everyone then treats it as gone. Migration is: add the new peers, then drain the
old ones.

A draining **master** does not stay until its runs are over: it hands them over (§3.3 and
§3.4 together). For each run it masters, it picks an heir (``heir``: the smallest name among
the members that stay and have the run's plugin, as the election would) and cuts its own root
subtree (``Orphaned``, abort.py): each frame's finished children are kept as orphans on the
way up. When the root is dropped (``root_dropped``), it sends the heir those results and then
the run (``HandOver``); the heir files the results in its orphan table *before* it respawns
the root under the next epoch (election.take_over), so the new epoch reuses them at once
instead of racing their tuples. The members abort the jobs they took from the old root
subtree as soon as they hear of the new epoch (lifecycle.new_epoch), keeping and announcing
what those finished; results that still come back here are kept and handed over when this
peer leaves. It leaves once the heir's announcement reached it: leaving earlier, the members
would elect a master of their own as well. The submitter, which waits here, gets the result
through this peer while it lives, then through the others (client/follow.py). Queued runs
are handed over at once. Without an heir (every other member drains, or none has the plugin)
the master stays until its runs are over.

Not done: the new epoch could adopt the jobs in flight instead of computing them again (their
thieves would send the result to it as well). It is not, because a thief that waits in an
old-epoch frame may steal a new-epoch ancestor of that frame and run it on top: the new job
would then wait for the frame beneath it, a deadlock that one epoch cannot have (an ancestor
runs before its descendants exist). See docs/benchmarks.md, "Master drain", for the cost.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import satind.stats as stats
from satind.core import kinds
from satind.core.effects import (
    INFO,
    Changed,
    Effects,
    Send,
    StealUpdate,
    Task,
    ToCompute,
    WakeWaiters,
)
from satind.core.election import successor, take_over, take_over_handed, take_over_queued
from satind.core.lifecycle import register
from satind.core.orphans import keep_orphan
from satind.core.runs import RUNNING
from satind.net import messages as m
from satind.work.events import Orphaned
from satind.work.jobs import Job
from satind.work.rng import seeded

if TYPE_CHECKING:
    from satind.core.state import PeerState


def start(
    state: PeerState, reason: str, now: float = 0.0, leaving: Collection[str] = ()
) -> Effects:
    """Stop taking work; the node announces it and waits for ``drained``. ``leaving``: the
    members drained with this one, which must not inherit its runs."""
    state.leaving.update(leaving)
    if state.draining:
        return []
    state.note(INFO, __name__, "draining: %s", reason)
    state.draining = True
    fx: Effects = [StealUpdate(), *give_back_queued(state)]
    for kind in kinds.each():
        if kind.draining is not None:
            fx += kind.draining(state, now)  # SPMD entities ask their masters to move them
    return fx


def give_back_queued(state: PeerState) -> Effects:
    """The jobs this peer stole that wait in its queue, not started, go back to their
    victims: the thief says it does not have them ("unknown"), and each victim takes its job
    back and runs it (core/custody.py), instead of the drain waiting while this peer runs
    them — a thief that took half of a bag (``steal.batch_max``) may hold many. A job the
    compute side took meanwhile stays here and is finished."""
    fx: Effects = []
    for (key, victim), jobs in list(state.custody.taken.items()):
        for job in list(jobs):
            if kinds.of_job(job) is not None:
                continue  # an iterative task or SPMD step: its kind moves it (``start``)
            try:
                state.queue.jobs.remove(job)  # atomic beside the compute side's pops
            except ValueError:
                continue  # started, or not in the queue yet
            jobs.remove(job)
            fx.append(Send(victim, m.JobState(key[0], key[1], "unknown")))
        if not jobs:
            state.custody.taken.pop((key, victim), None)
    if fx:
        state.note(INFO, __name__, "draining: gave back %d job(s) not started", len(fx))
    return fx


def cut(state: PeerState) -> Effects:
    """The drain's deadline passed: leave as the paper's leaving processor does (§3.3), at
    once. Every job this peer took from others is cut (``Orphaned``): each frame's finished
    children are kept on the way up (engine/unwind.py), and handed, when it leaves, to the
    victim the job came from — which has them filed before it restarts the job, so the
    finished part is reused, not redone. Jobs it gave to thieves are not waited for: when
    it has left, their thieves keep their results as orphans (core/restart.py). A run it
    masters is handed over as in any drain (``hand_over_runs``)."""
    if state.cut or not state.draining:
        return []
    state.cut = True
    state.note(INFO, __name__, "the drain's deadline passed: cutting what is left, then leaving")
    fx: Effects = []
    for (key, victim), jobs in list(state.custody.taken.items()):
        for job in jobs:
            if kinds.of_job(job) is not None:
                continue  # an iterative task or SPMD step: its kind moves it (``start``)
            state.cut_owners.setdefault(key[0], []).append((key[1], victim))
            fx.append(ToCompute(Orphaned(job)))
        # The custody records stay until this peer has left: a victim that asks meanwhile
        # hears "running", not "unknown", and waits for the handed results before it
        # restarts the job.
    return [*fx, Changed()]


def drained(state: PeerState) -> bool:
    """Nothing here any more that another peer waits for. "Idle" (wanting work) is not
    enough: a frame may wait in a sync for children that thieves still compute. Jobs given
    out of a run handed over are not waited for: nobody here needs their results."""
    handed = {r.info.run_id for r in state.runs.active.values() if r.handed_to is not None}
    return (
        state.worker_idle
        and state.worker_frames == 0
        and (state.cut or not any(key[0] not in handed for key in state.custody.given))
        # Jobs held while a lost member's log is read are this peer's to restart.
        and not state.reading_logs
        and not state.queue.jobs
        # Entities of SPMD runs move away first (core/spmd/ asks their masters).
        and not any(k.holds_work(state) for k in kinds.each() if k.holds_work is not None)
        # A run handed over counts until its heir announced the new epoch: leaving before,
        # the members would elect a master of their own for it as well.
        and not state.runs.mastered_by(state.name)
        and not state.runs.queue
    )


def leave(state: PeerState) -> Effects:
    """Drained: each master gets this peer's share of its runs' counters; a peer that stays
    gets the results this peer keeps."""
    state.note(INFO, __name__, "drained; leaving")
    fx: Effects = []
    for run in state.runs.active.values():
        master = run.info.master if run.info.master != state.name else run.handed_to
        if master is not None:
            share = stats.as_ints(state.run_counters(run.info.run_id))
            fx.append(Send(master, m.RunShare(run.info.run_id, share)))
    return fx + hand_over(state)


# -- a draining master hands its runs over -----------------------------------------------------


def heir(state: PeerState, info: m.RunInfo) -> str | None:
    """Who takes a run over from this draining master: the election's choice among the
    members that stay and have the run's plugin (same code), or None."""

    def can_run(member_plugins: dict[str, str]) -> bool:
        # Any member can run a shipped run: it fetches the code (core/shipping.py).
        return info.shipped or member_plugins.get(info.plugin) == info.code_hash

    capable = {mem.name for mem in state.table.alive() if can_run(mem.plugins)}
    name = successor(state, but=state.name, among=capable)
    member = state.table.get(name) if name is not None else None
    if member is None or member.draining or name in state.leaving:
        return None
    return name


def hand_over_runs(state: PeerState) -> Effects:
    """Draining: start handing over every run this peer masters that has an heir (again
    after each change: a member that stays may join later). A started run's root subtree is
    cut here first (``root_dropped`` sends it on); a queued run goes at once."""
    if not state.draining:
        return []
    fx: Effects = []
    for run in state.runs.mastered_by(state.name):
        root = run.root
        if run.cutting or run.handed_to is not None or run.status != RUNNING:
            continue
        if root is None or root.done or heir(state, run.info) is None:
            continue
        state.note(INFO, __name__, "run %s: handing it over (this master drains)", run.info.run_id)
        run.cutting = True
        fx.append(ToCompute(Orphaned(root)))
    for queued in list(state.runs.queue):
        to = heir(state, queued.info)
        if to is None:
            continue
        state.runs.queue.remove(queued)
        info = queued.info
        state.note(INFO, __name__, "queued run %s: handing it over to %s", info.run_id, to)
        fx += send_results(state, to, [], queued=[info])
        # Whoever waits here for it asks the heir from now on.
        state.runs.queued_elsewhere[info.run_id] = dataclasses.replace(
            info, master=to, epoch=info.epoch + 1
        )
        fx.append(WakeWaiters(info.run_id))
        if queued.submitter is not None:
            fx.append(Task("forward_result", info.run_id, queued.submitter))
    return fx


def root_dropped(state: PeerState, job: Job, now: float) -> Effects:
    """The compute side dropped the root of a cut subtree, after reporting what it kept. If
    it is the root of a run this master hands over, the heir gets the run's kept results,
    then the run. Without an heir any more, this peer respawns the root itself (next epoch,
    reusing what it keeps) and stays until the run is over."""
    run = state.runs.active.get(job.run.run_id)
    if run is None or run.root is not job or not run.cutting:
        return []  # an ordinary orphan subtree (restart.py)
    run.cutting = False
    run.root = None
    to = heir(state, run.info)
    if to is None:
        return take_over(state, run, now, "no member to hand it over to")
    run_id = run.info.run_id
    results = [r for key, r in state.orphans.kept.items() if key[0] == run_id]
    run.handed_to = to
    run.handed = {r.path for r in results}
    state.note(
        INFO, __name__, "run %s: handed over to %s with %d result(s)", run_id, to, len(results)
    )
    return send_results(state, to, results, runs=[run.info])


# -- results and runs handed over (§3.3) -------------------------------------------------------


def hand_over(state: PeerState) -> Effects:
    """Leaving gracefully: give the results we keep to a peer that stays (§3.3). Those of a
    run this peer handed over as its master go to that run's new master, less the ones it
    already has."""
    others = state.others()
    if not (state.orphans.kept and others and state.cfg.ft.orphans):
        return []
    # A peer that stays, if there is one: one that drains too would have to hand them on.
    staying = [
        mem.name
        for mem in state.table.alive()
        if mem.name in others and not mem.draining and mem.name not in state.leaving
    ]
    anyone = seeded(state.name).choice(staying or others)
    to: dict[str, list[m.JobResult]] = {}
    for (run_id, path), result in state.orphans.kept.items():
        run = state.runs.active.get(run_id)
        dest = anyone
        if run is not None and run.handed_to is not None:
            if path in run.handed:
                continue
            if run.handed_to in others:
                dest = run.handed_to
        # Cut at the deadline: a result below a job taken from a victim goes to that victim,
        # which restarts the job (paths are a prefix-free code: a prefix is an ancestor).
        for top, victim in state.cut_owners.get(run_id, ()):
            if path.startswith(top) and victim in others:
                dest = victim
                break
        to.setdefault(dest, []).append(result)
    fx: Effects = []
    for dest, results in to.items():
        state.note(INFO, __name__, "handing %d result(s) over to %s", len(results), dest)
        fx += send_results(state, dest, results)
    return fx


def send_results(
    state: PeerState,
    to: str,
    results: Sequence[m.JobResult],
    runs: Sequence[m.RunInfo] = (),
    queued: Sequence[m.RunInfo] = (),
) -> Effects:
    """``HandOver`` messages to ``to``, well inside the frame and item caps; runs handed over
    ride on the last one, so that the heir has every result before it takes them over."""
    budget = state.cfg.net.max_frame_bytes // 2
    fx: Effects = []
    batch: list[m.JobResult] = []
    size = 0
    for result in results:
        weight = len(result.value or b"") + len(result.path) + 64
        if batch and (size + weight > budget or len(batch) >= state.cfg.ft.tuples_per_message):
            fx.append(Send(to, m.HandOver(batch)))
            batch, size = [], 0
        batch.append(result)
        size += weight
    fx.append(Send(to, m.HandOver(batch, list(runs), list(queued))))
    return fx


def on_hand_over(state: PeerState, msg: m.HandOver, now: float) -> Effects:
    """A leaving peer's results: kept here and announced under this peer's name. Runs a
    draining master handed over are taken over once the results are filed (drain.py)."""
    fx: Effects = []
    for info in msg.runs:
        if info.run_id not in state.runs.active:
            fx += register(state, info)[1]  # the results below need the run known here
    for result in msg.results:
        fx += keep_orphan(state, result)
    for info in msg.runs:
        fx += take_over_handed(state, info, now)
    for info in msg.queued:
        fx += take_over_queued(state, info, now)
    return fx
