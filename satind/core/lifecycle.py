"""A run's life as every peer sees it: known, superseded by a new epoch, over.

Runs are announced by gossip (``RunAnnounce``: the descriptor and a state). A peer registers a
run when it first hears of it (or steals one of its jobs), follows it to a new epoch when a
new master respawns it (core/election.py), and drops it when it hears that it ended:
its frames still waiting here unwind (``RunState.aborted``), its custody and kept results go.
A master that hears its run ended under another master — it was paused or cut off long
enough to be taken for dead — drops its stale epoch and sends its submitter the new master's
result (``abdicate``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import satind.descriptor as plugins
from satind.core import kinds, sharing
from satind.core.effects import (
    ERROR,
    INFO,
    WARNING,
    Changed,
    Checkpoint,
    Effects,
    FetchCode,
    Log,
    Send,
    Spread,
    StealUpdate,
    Task,
    ToCompute,
    WakeWaiters,
)
from satind.core.runs import (
    CANCELLED,
    ENDED,
    FINAL,
    QUEUED,
    RUNNING,
    SUSPENDED,
    PeerRun,
    supersedes,
)
from satind.core.start import start_next
from satind.net import messages as m
from satind.work.events import Orphaned, Wakeup

if TYPE_CHECKING:
    from satind.core.state import PeerState


def register(state: PeerState, info: m.RunInfo) -> tuple[PeerRun | None, Effects]:
    """Know a run (from gossip, a stolen job, or our own submission). None for a run that
    already ended (a late, delayed or duplicated message about it)."""
    runs = state.runs
    if info.run_id in runs.ended:
        return None, []
    run = runs.active.get(info.run_id)
    if run is not None:
        if supersedes(info, run.info):
            return run, new_epoch(state, run, info)
        learns_start = run.info.started_at is None and info.started_at is not None
        if info.epoch == run.info.epoch and info.args and (not run.info.args or learns_start):
            # A stolen job's stub learns the full descriptor; a run known before its start,
            # when it started (for its elapsed time if this peer is to master it).
            run.info = info
        return run, []
    refused = None
    fx: Effects = []
    plugin = state.plugin_version(info.plugin, info.code_hash)
    if plugin is None and info.shipped and not state.cfg.plugins.accept_shipped:
        # Its operator did not accept shipped code: it takes no part (its thief skips it).
        refused = f"peer {state.name} takes no part: it does not accept shipped code"
    elif plugin is None and info.shipped:
        fx += _fetch_code(state, info)
    elif plugin is None:
        try:
            installed = state.plugin_named(info.plugin)
            refused = (
                f"peer {state.name} has plugin {info.plugin} with code hash "
                f"{installed.code_hash[:12]}, the run's master {info.master} has "
                f"{info.code_hash[:12]}"
            )
        except plugins.UnknownPlugin as exc:
            refused = f"peer {state.name}: {exc}"
    if plugin is not None and (why := state.unmet_why(plugin)):
        refused = f"peer {state.name} takes no part: plugin {info.plugin} requires {why}"
    if refused:
        state.note(ERROR, __name__, "refusing run %s: %s", info.run_id, refused)
    return runs.add(info, plugin, refused, state.peer_counters()), fx


def _taken_from_queue(state: PeerState, info: m.RunInfo) -> None:
    """A run still waiting in this master's queue (``run.max_concurrent``) that another master
    runs or ended under a later epoch: this peer was paused or cut off long enough to be
    taken for dead, and the queued run was started by the elected peer (core/election.py).
    It leaves the queue for the run table, still under this peer's old descriptor, so that
    the announcement supersedes it as it would a run running here — ``new_epoch`` or
    ``abdicate``, which send the submitter waiting here the new master's result. Left in the
    queue, its client waited for ever and this peer would have started it once more."""
    runs = state.runs
    queued = next((r for r in runs.queue if r.info.run_id == info.run_id), None)
    if queued is None or not supersedes(info, queued.info):
        return
    runs.queue.remove(queued)
    queued.status = RUNNING  # elsewhere: it is no longer this peer's to start
    runs.active[info.run_id] = queued
    state.note(
        WARNING,
        __name__,
        "run %s, queued here, was started by %s (epoch %d) while this peer was taken for "
        "dead: its submitter gets that master's result",
        info.run_id,
        info.master,
        info.epoch,
    )


def _fetch_code(state: PeerState, info: m.RunInfo) -> Effects:
    """A run whose shipped code this peer lacks: known, not refused, and not run here until
    the code comes (core/shipping.py takes it from there); fetched once per version, from the
    run's master first, then any other member."""
    if info.code_hash in state.fetching:
        return []
    state.fetching.add(info.code_hash)
    # Alive members only: a lost master (its restarted instance may be this very peer, at the
    # same address) would cost the whole ask's timeout before the next source is tried.
    alive = state.others()
    others = [name for name in alive if name != info.master]
    sources = ([info.master] if info.master in alive else []) + others
    state.note(
        INFO, __name__, "run %s: fetching its shipped code %s", info.run_id, info.code_hash[:12]
    )
    return [FetchCode(info.code_hash, tuple(sources))]


def on_announces(state: PeerState, announces: list[m.RunAnnounce], now: float) -> Effects:
    """Gossip about runs. What is news here is logged and spread on (epidemically, so that
    one lost message does not leave a peer stealing for a run that is long over)."""
    fx: Effects = []
    news = 0
    for announce in announces:
        changed, effects = _on_announce(state, announce, now)
        fx += effects
        if not changed:
            continue
        news += 1
        if announce.state == RUNNING:
            fx.append(Log("run", announce))
        elif announce.state in FINAL:
            fx.append(Log("end", announce))
        elif announce.state == SUSPENDED:
            # What this peer did for the run goes to its log now: a resume continues from it.
            fx.append(Checkpoint("flush"))
        fx.append(Spread(announce))
    if news:
        fx.append(StealUpdate())
    return fx


def _on_announce(state: PeerState, announce: m.RunAnnounce, now: float) -> tuple[bool, Effects]:
    runs = state.runs
    run_id = announce.info.run_id
    if (
        announce.state == RUNNING
        and run_id in runs.suspended
        and announce.info.epoch > runs.suspended[run_id]
    ):
        runs.reopen(run_id)  # resumed
    if run_id in runs.ended or run_id in runs.finished:
        return False, []
    if announce.info.master != state.name:
        _taken_from_queue(state, announce.info)
    if announce.state != QUEUED:
        runs.queued_elsewhere.pop(run_id, None)  # started, or over: no longer waiting
    elif announce.info.master != state.name and run_id not in runs.active:
        # Another master queues it: kept (arguments and all), so that the run is not lost
        # with that master (election starts it). News only the first time.
        waiting = runs.queued_elsewhere.get(run_id)
        if waiting is None or supersedes(announce.info, waiting):
            runs.queued_elsewhere[run_id] = announce.info
            return waiting is None, []
        return False, []
    if announce.state in ENDED:
        run = runs.active.get(run_id)
        if run is not None and run.info.epoch > announce.info.epoch and announce.state not in FINAL:
            # A suspension that a resume superseded. A final end of an older epoch is not:
            # the other side of a healed partition (or a master resumed from a pause) ended
            # the run while this side's takeover went on, and the run is over — computing it
            # to the end again would only make a second, equal result nobody waits for.
            return False, []
        runs.remember_ended(announce)
        if announce.state == SUSPENDED:
            runs.suspended[run_id] = announce.info.epoch
        if run is None:
            for kind in kinds.each():  # what came before the run was known here
                if kind.forget_unknown is not None:
                    kind.forget_unknown(state, run_id)
        if run is not None and run.info.master != state.name:
            return True, drop(state, run_id)
        if run is not None and announce.info.master != state.name:
            return True, abdicate(state, run, announce, now)
        return True, []
    if announce.state == RUNNING:
        known = runs.active.get(run_id)
        if (
            known is None
            or supersedes(announce.info, known.info)
            # Known only from a stolen job (a stub without the arguments, which came before
            # the announcement): without them this peer could not respawn the run if it
            # were elected, and nobody else would.
            or (not known.info.args and announce.info.args)
        ):
            return True, register(state, announce.info)[1]
    return False, []


def new_epoch(state: PeerState, old: PeerRun, info: m.RunInfo) -> Effects:
    """A new master respawned the run's root (its old master was lost). The old epoch's work
    here goes on: it ends in orphans (results whose owner, the old master, is gone), which the
    new epoch reuses (§3.4). A job computes the same value in any epoch, so results of either
    epoch complete jobs of the same path in both (custody.py).

    If this peer was the old master (taken for dead, but alive), its root's result no longer
    counts; whoever waits here for the result asks the new master, and the submitter, who
    still talks to us, gets the new master's result through us."""
    state.note(
        INFO,
        __name__,
        "run %s: epoch %d, master %s (was %s)",
        info.run_id,
        info.epoch,
        info.master,
        old.info.master,
    )
    fx: Effects = []
    before = state.table.get(old.info.master)
    if before is not None and before.alive and before.draining and state.cfg.ft.orphans:
        # A draining master handed the run over (core/drain.py): the jobs we took from
        # its old root subtree are orphans now, as if it were gone. Aborted at once, what
        # they finished is kept and announced while the new epoch is young.
        fx += [
            ToCompute(Orphaned(job))
            for job in state.custody.orphaned_by(before.name, old.info.run_id)
        ]
    if old.info.master == state.name:
        if old.root is not None and not old.root.done:
            # Our root of the old epoch stops, keeping what it finished as orphans for the
            # new epoch (abort.py): going on, it would call the run's shared objects, which
            # are the new epoch's now (a new incarnation), from a frame nobody waits for.
            fx.append(ToCompute(Orphaned(old.root)))
        old.root = None
        fx.append(WakeWaiters(info.run_id))
        fx.append(Changed())  # a draining master that handed the run over may leave now
        if old.submitter is not None:
            fx.append(Task("forward_result", info.run_id, old.submitter))
            old.submitter = None
    old.info = info
    old.state.epoch = info.epoch
    return fx


def abdicate(state: PeerState, run: PeerRun, end: m.RunAnnounce, now: float) -> Effects:
    """The run ended under another master while this peer still mastered an older epoch of
    it: this peer was paused or cut off long enough to be taken for dead, and a survivor took
    the run over and finished it. Drop this epoch (its frames unwind, its custody goes) and
    send the submitter, who still waits here, the new master's result: a stale master must
    neither compute on nor keep its client waiting."""
    run_id = run.info.run_id
    state.note(
        WARNING,
        __name__,
        "run %s %s under master %s (epoch %d) while this peer mastered epoch %d: dropping "
        "this epoch",
        run_id,
        end.state,
        end.info.master,
        end.info.epoch,
        run.info.epoch,
    )
    submitter, run.submitter, run.root = run.submitter, None, None
    fx = drop(state, run_id)
    fx.append(WakeWaiters(run_id))  # they find the run moved and ask its new master
    if submitter is not None:
        if end.state in (SUSPENDED, CANCELLED):
            fx.append(Send(submitter, stopped_result(run_id, end.state, 0.0, 0)))
        else:
            fx.append(Task("forward_result", run_id, submitter))
    return fx + start_next(state, now) + [Changed()]


def stopped_result(run_id: str, how: str, elapsed_s: float, peers: int) -> m.RunResult:
    """What the submitter of a run that an operator stopped is sent (and `satind result`
    answers): no value, and why — suspended (a resume continues it) or cancelled."""
    if how == SUSPENDED:
        why = f"run {run_id} was suspended; `satind resume {run_id}` continues it"
        return m.RunResult(run_id, None, m.ErrorInfo("RunSuspended", why), elapsed_s, peers, {})
    why = f"run {run_id} was cancelled"
    return m.RunResult(run_id, None, m.ErrorInfo("RunCancelled", why), elapsed_s, peers, {})


def drop(state: PeerState, run_id: str) -> Effects:
    """A run this peer took part in is over here: forget it, its custody records and kept
    results, and make the compute side abandon its frames that still wait (a duplicate, or
    an orphan)."""
    run = state.runs.remove(run_id)
    if run is None:
        return []
    state.custody.forget_run(run_id)
    fx = sharing.forget_run(state, run_id)
    for kind in kinds.each():
        if kind.forget_run is not None:
            kind.forget_run(state, run_id)
    state.cancelled = {job for job in state.cancelled if job.run.run_id != run_id}
    state.orphans.forget_run(run_id)
    run.state.aborted = True
    state.queue.drop_run(run_id)
    return [*fx, ToCompute(Wakeup()), StealUpdate(), Changed()]


def check_answered(state: PeerState, run_id: str, reply: m.Message | None) -> Effects:
    """A run's master answered whether the run is over (``Task("check_run")``)."""
    if isinstance(reply, m.ResultReply) and (
        reply.result is not None or reply.error.startswith("no run")
    ):
        state.note(INFO, __name__, "run %s is over (its master says so)", run_id)
        return drop(state, run_id)
    return []
