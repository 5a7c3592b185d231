"""Election: a run whose master is lost gets a new one (satin-fault-tolerance §3.4).

The rule is deterministic over the membership view: the alive member with the smallest name
(``successor``: among those not draining, if any are not, and among those that can run it:
``able``, by their gossiped plugins) takes over every run whose master is no longer alive,
under the next **epoch**, and respawns the root. Views converge, so the members agree; if
they differ for a moment and two take over, the higher epoch — then the smaller master name —
wins (``runs.supersedes``), and the loser follows the winner. A draining master hands its
runs over to the same choice of peer itself (core/drain.py, ``take_over_handed``). The run's
arguments travel with its descriptor, so any peer that knows the run can respawn it; the
same run state goes on, so whatever the old epoch finished — here, or kept as orphans
anywhere — is reused by the new one (orphans.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import TYPE_CHECKING

from satind.core import logged
from satind.core.effects import ERROR, INFO, WARNING, Effects, QueueRoot, Timer, ToCompute
from satind.core.model.timers import ElectAgain
from satind.core.runs import PeerRun, run_state
from satind.core.start import queue_or_start, start
from satind.net import messages as m
from satind.net.codec import Encoded
from satind.work.events import Orphaned

if TYPE_CHECKING:
    from satind.core.state import PeerState


def successor(state: PeerState, but: str = "", among: Collection[str] | None = None) -> str | None:
    """Who takes over runs: the alive member with the smallest name (other than ``but``, and
    one of ``among`` if given), among those that do not drain if any do not (a draining one
    would have to hand the runs on again). Views converge, so the members agree."""
    alive = [
        mem
        for mem in state.table.alive()
        if mem.name != but and (among is None or mem.name in among)
    ]
    staying = [
        mem.name
        for mem in alive
        if not (
            mem.draining or mem.name in state.leaving or (mem.name == state.name and state.draining)
        )
    ]
    return min(staying or [mem.name for mem in alive], default=None)


def elect(state: PeerState, now: float) -> Effects:
    """Take over the runs whose master is gone, if this peer is the one to (on every member
    change)."""
    return _take_over_orphans(state, now, 0.0)


def elect_late(state: PeerState, now: float) -> Effects:
    """The election's second chance, now and then and when news of runs comes: a run whose
    master has been gone for ``ft.takeover_grace_s`` and that nobody took over (the peer the
    election named learnt of the run only after the death: a restarted peer, or a run it
    knew only from a stolen job, without the arguments to respawn it). A master replaced by
    a newer instance of its slot waits only ``ft.replaced_grace_s``: see
    ``_take_over_orphans``."""
    return _take_over_orphans(state, now, state.cfg.ft.takeover_grace_s)


def _take_over_orphans(state: PeerState, now: float, grace: float) -> Effects:
    """Runs (running, or queued by their master) whose master is not alive in this peer's
    view, taken over if this peer is the successor and they have been orphaned ``grace``
    seconds. The orphaned runs are looked for first: finding none is cheap.

    The grace is for a death this peer may have imagined: resumed from a pause, it takes
    everybody for dead until their refutations come. A master whose slot runs a newer
    instance is dead for certain (its daemon started the new one once the old process had
    ended), and news of that instance cannot be imagined: its runs wait only
    ``ft.replaced_grace_s``, and a timer looks again then. That is the common case of the
    restarted peer: the daemon restarts the lost master, whose new instance has the smallest
    name, is named by the election before it knows the run, and learns the run a moment later
    (gossip, or its first state sync). The short wait is for a takeover made before the new
    instance appeared (the restart was slower than the death's detection): the run's first
    news here may predate it, and taking the run over again would throw its progress away."""

    if not state.settled:
        return []  # a view still being learnt (a joiner): the others decide

    def gone(master: str) -> bool:
        # Known to be gone: a master this peer has not heard of yet is not taken for dead.
        member = state.table.get(master)
        return member is not None and member.state.gone

    def wait(master: str) -> float:
        replaced = state.table.replaced(master)
        return min(grace, state.cfg.ft.replaced_grace_s) if replaced else grace

    runs = state.runs.orphaned(gone)
    queued = [i for i in state.runs.queued_elsewhere.values() if gone(i.master)]
    since = state.runs.orphaned_since
    masters = {r.info.run_id: r.info.master for r in runs} | {i.run_id: i.master for i in queued}
    for run_id in [r for r in since if r not in masters]:
        del since[run_id]
    fx: Effects = []
    for run_id, master in masters.items():
        if run_id not in since:
            since[run_id] = now
            if state.table.replaced(master) and wait(master) > 0:
                # Not for the next custody tick (seconds away): look again when it is up.
                fx.append(Timer(wait(master) * 1.01, ElectAgain()))
    runs = [r for r in runs if now - since[r.info.run_id] >= wait(r.info.master)]
    queued = [i for i in queued if now - since[i.run_id] >= wait(i.master)]
    for run in runs:
        if successor(state, among=able(state, run.info)) == state.name:
            fx += take_over(state, run, now, lost=run.info.master)
    for info in queued:
        if successor(state, among=able(state, info)) == state.name:
            fx += take_over_queued(state, info, now)
    return fx


def able(state: PeerState, info: m.RunInfo) -> set[str] | None:
    """The members that can master a run, from their gossiped plugins: those with its
    plugin's version, not those that lack it or its requirements (plugin/requirements.py).
    A member that has gossiped no list yet counts as able. None: any member (a shipped run:
    each fetches its code, core/shipping.py)."""
    if info.shipped:
        return None
    return {
        mem.name
        for mem in state.table.alive()
        if not mem.plugins or mem.plugins.get(info.plugin) == info.code_hash
    }


def take_over_queued(state: PeerState, info: m.RunInfo, now: float) -> Effects:
    """A run its lost master had queued (not started): this peer masters it under the next
    epoch, and starts it when a slot is free, as its own submissions. The submitter follows
    it through the other members (client/follow.py)."""
    state.runs.queued_elsewhere.pop(info.run_id, None)
    # Installed, or shipped and fetched here (a queued shipped run's code may not be: it is
    # then lost with its master; core/shipping.py).
    plugin = state.plugin_version(info.plugin, info.code_hash)
    if plugin is None:
        why = (
            f"this peer has another version of {info.plugin}"
            if info.plugin in state.plugins
            else f"this peer has no plugin {info.plugin} in version {info.code_hash[:12]}"
        )
        state.note(ERROR, __name__, "run %s lost its master: %s", info.run_id, why)
        return []
    new = dataclasses.replace(info, master=state.name, epoch=info.epoch + 1)
    state.note(
        WARNING,
        __name__,
        "queued run %s lost its master %s: taking it over as epoch %d",
        info.run_id,
        info.master,
        new.epoch,
    )
    run = PeerRun(new, run_state(new, plugin.name), plugin)
    run.args = Encoded(new.args)  # decoded by the compute side, not here
    return queue_or_start(state, run, now)


def take_over_handed(state: PeerState, info: m.RunInfo, now: float) -> Effects:
    """A draining master handed this run over (core/drain.py): take it over as the
    election would, unless it moved on meanwhile (another peer took it over, or it ended)."""
    run = state.runs.active.get(info.run_id)
    if run is None or run.info.epoch != info.epoch or run.info.master != info.master:
        state.note(INFO, __name__, "run %s was handed over, but it moved on meanwhile", info.run_id)
        return []
    # What this peer took from the old root subtree is orphaned, as on every member
    # (lifecycle.new_epoch); here the announcement comes from this peer itself.
    orphaned = state.custody.orphaned_by(info.master, info.run_id)
    fx: Effects = [ToCompute(Orphaned(job)) for job in orphaned]
    return fx + take_over(state, run, now, f"its master {info.master} drains")


def take_over(state: PeerState, run: PeerRun, now: float, why: str = "", lost: str = "") -> Effects:
    """Become the run's master under the next epoch and respawn its root. ``lost``: the
    master whose loss this is (not a hand-over); when this peer checkpoints, the root waits
    until the logs are read (core/logged.py), so what the lost members logged is reused from
    the first spawn."""
    why = why or f"its master {run.info.master} is lost"
    if run.plugin is None or run.refused is not None:
        state.note(
            ERROR if run.refused is not None else INFO,
            __name__,
            "run %s: %s, but this peer cannot run it: %s",
            run.info.run_id,
            why,
            run.refused or "its shipped code is still coming (it takes over once it has it)",
        )
        return []
    info = dataclasses.replace(run.info, master=state.name, epoch=run.info.epoch + 1)
    # A master lost is news for the operator; a hand-over is routine.
    level = INFO if why.endswith("drains") else WARNING
    state.note(level, __name__, "run %s: %s; taking over as epoch %d", info.run_id, why, info.epoch)
    run.info = info
    run.state.epoch = info.epoch  # the shared objects the respawned root makes are new
    run.args = Encoded(info.args)  # decoded by the compute side, not here
    run.submitter = None
    fx = start(state, run, now)
    root = run.root
    divide = run.plugin.kind == "divide-and-conquer"
    if lost and divide and root is not None and state.checkpoint.enabled and state.cfg.ft.orphans:
        fx = [f for f in fx if f != QueueRoot(root)] + logged.hold(state, lost, [], root)
    return fx
