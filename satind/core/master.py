"""What a run's master decides: accept or refuse a run, start it, end it, suspend it.

A client submits to any peer, which becomes the run's **master**: once the submission is
admitted (core/admission.py: the plugin's version on every member, its arguments parsed),
it gives the run an id and announces it (gossip, and a
direct message to every member with the run's orphan table, if any), then queues the root at
its work queue — or keeps the run waiting when it already masters ``run.max_concurrent``
runs. When the root finishes, the master gathers every member's share of the counters (the
node asks them), keeps the result (bounded) for ``satind result``, sends it to the submitter
and announces the end. ``satind resume`` makes a peer the master of a checkpointed run under a
new epoch; ``satind suspend`` stops a run so that a resume continues it.

Plugin code (parsing the arguments, the branching factor) runs where the node puts it (a
worker thread: ``satind/plugin/hooks.py``), never in these handlers; so do a run's check
and report (``hooks.judge``), whose outcome ``finish`` takes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import satind.descriptor as plugins
import satind.files as files
import satind.stats as stats
from satind.core.admission import plugin_mismatches
from satind.core.effects import (
    INFO,
    WARNING,
    Changed,
    Effects,
    Link,
    Remember,
    Reply,
    Send,
    WakeWaiters,
)
from satind.core.lifecycle import drop, on_announces, stopped_result
from satind.core.orphans import keep_orphan
from satind.core.runs import (
    CANCELLED,
    DONE,
    FAILED,
    FINAL,
    QUEUED,
    RUNNING,
    SUSPENDED,
    Finished,
    PeerRun,
    RunRefused,
    VersionMismatch,
    run_state,
)
from satind.core.start import announce, queue_or_start, start, start_next
from satind.net import codec
from satind.net import messages as m
from satind.net.names import client_base_name
from satind.work.errors import error_info
from satind.work.rng import seeded

if TYPE_CHECKING:
    from satind.core.state import PeerState


def submit(
    state: PeerState,
    link: Link,
    msg: m.Submit,
    parsed: plugins.Parsed | Exception | files.InputNeeded,
    now: float,
) -> Effects:
    """Accept (start or queue) or refuse a submission whose arguments were parsed."""
    if isinstance(parsed, files.InputNeeded):
        error = error_info(parsed)
        return [Reply(link, m.Submitted(msg.req, "", error, needs=[parsed.name]))]
    if isinstance(parsed, Exception):
        return [Reply(link, m.Submitted(msg.req, "", error_info(parsed)))]
    info = m.RunInfo(
        run_id=state.run_ids(),
        plugin=parsed.plugin.name,
        code_hash=parsed.plugin.code_hash,
        argv=list(msg.argv),
        args=parsed.encoded,
        master=state.name,
        branching=parsed.branching,
        check=msg.check,
        entry=parsed.entry,
        owner=client_base_name(link.remote_name),
        shipped=bool(msg.files),
        weight=msg.weight,
    )
    run = PeerRun(info, run_state(info), parsed.plugin)
    run.submitter = link.remote_name
    run.args = parsed.args
    reply = _accepted(state, m.Submitted(msg.req, info.run_id))
    return [Reply(link, reply), *queue_or_start(state, run, now)]


def _accepted(state: PeerState, reply: m.Submitted) -> m.Submitted:
    """A run accepted here: tell the client where else to ask for it (if we are lost, it
    follows the run to its next master through them)."""
    others = [mem for mem in state.members() if mem.name != state.name]
    seeded(reply.run_id).shuffle(others)
    contacts = [str(mem.address) for mem in others[: state.cfg.client.contacts]]
    return dataclasses.replace(reply, contacts=contacts)


def resume(
    state: PeerState,
    link: Link,
    req: int,
    info: m.RunInfo,
    results: Sequence[m.JobResult],
    now: float,
    barrier: m.Barrier | None = None,
) -> Effects:
    """Become the master of a checkpointed run under the next epoch: the checkpointed
    results become this peer's orphans, found at spawn and used; then the root is respawned,
    an iterative or SPMD run's from its newest logged ``barrier`` (as a new master's is from
    the one the members keep)."""
    runs = state.runs
    try:
        found = state.plugin_version(info.plugin, info.code_hash)
        if found is None and info.shipped:
            raise RunRefused(
                f"run {info.run_id} ran shipped code {info.code_hash[:12]}, which peer "
                f"{state.name} does not have (any more): resume it on a peer that ran it, or "
                "submit it again with its code (--ship)"
            )
        plugin = found or state.plugin_named(info.plugin)
        if plugin.code_hash != info.code_hash:
            raise VersionMismatch(
                f"the checkpoint of {info.run_id} was written by plugin {info.plugin} with "
                f"code hash {info.code_hash[:12]}; peer {state.name} has {plugin.code_hash[:12]}"
            )
        problems = [] if info.shipped else plugin_mismatches(plugin, state.members())
        if problems:
            raise VersionMismatch("; ".join(problems))
        if info.run_id in runs.active:
            raise RunRefused(f"run {info.run_id} is running already")
        if info.run_id not in runs.suspended and (
            info.run_id in runs.ended or info.run_id in runs.finished
        ):
            why = runs.status_of(info.run_id)
            raise RunRefused(f"run {info.run_id} is over ({why}): see `satind result`")
    except (plugins.UnknownPlugin, RunRefused) as exc:
        return [Reply(link, m.Submitted(req, "", error_info(exc)))]
    if info.run_id in runs.suspended:
        info = dataclasses.replace(info, epoch=max(info.epoch, runs.suspended[info.run_id]))
        runs.reopen(info.run_id)
    # Its time counts from the resume: the time it lay suspended, or lost, is not the run's.
    info = dataclasses.replace(info, master=state.name, epoch=info.epoch + 1, started_at=None)
    run = PeerRun(info, run_state(info, plugin.name), plugin)
    run.submitter = link.remote_name
    run.args = codec.Encoded(info.args)  # decoded by the compute side
    runs.active[info.run_id] = run
    fx: Effects = [Reply(link, _accepted(state, m.Submitted(req, info.run_id)))]
    for result in results:
        fx += keep_orphan(state, result)
    if barrier is not None:  # kept unless the members know a newer one
        state.iterative.keep_barrier(
            barrier.run_id, barrier.epoch, barrier.iteration, barrier.state
        )
    state.note(
        INFO,
        __name__,
        "run %s: resumed from checkpoints as epoch %d (%d results)",
        info.run_id,
        info.epoch,
        len(results),
    )
    return fx + start(state, run, now)


def finish(
    state: PeerState,
    run_id: str,
    shares: Sequence[dict[str, float]],
    now: float,
    verdict: plugins.Verdict | None = None,
    root_done: float | None = None,
) -> Effects:
    """The root finished and the members' shares of the counters are in (those that answered
    in time), and the plugin judged the value (``verdict``; None when it raised or there is
    no plugin here): keep the result, tell the submitter and everyone, start the next run."""
    run = state.runs.active.get(run_id)
    if run is None or run.root is None:
        return []  # superseded or dropped meanwhile
    root_done = now if root_done is None else root_done  # when the root finished
    elapsed = run.elapsed(root_done)
    own = state.run_counters(run_id)
    counters = stats.total([own, *shares, run.departed])
    counters.pop("progress", None)
    peers = len(state.members())
    answered = 1 + len(shares)
    if answered < peers:
        state.note(
            WARNING, __name__, "run %s: %d of %d peers sent statistics", run_id, answered, peers
        )
    result = _result_message(run, elapsed, peers, stats.as_ints(counters))
    result = dataclasses.replace(result, finish_s=round(now - root_done, 6))
    if verdict is not None and result.error is None:
        result = dataclasses.replace(
            result,
            report=verdict.report,
            check=verdict.check,
            outputs=verdict.outputs,
            kept=verdict.kept,
        )
    state.runs.keep(Finished(result, run.info, now), now)
    status = DONE if result.error is None else FAILED
    ended = m.RunAnnounce(run.info, status)
    fx = drop(state, run_id)
    state.runs.remember_ended(ended)
    state.runs.count_end(status)
    fx += announce(state, ended)
    fx += copies(state, run.info, status, result)
    if run.submitter is not None:
        fx.append(Send(run.submitter, result))
    fx += [WakeWaiters(run_id), Remember(run_id)]
    state.note(
        INFO,
        __name__,
        "run %s %s in %.3f s (+%.3f s statistics and check)",
        run_id,
        status,
        elapsed,
        now - root_done,
    )
    return fx + start_next(state, now) + [Changed()]


def _result_message(
    run: PeerRun, elapsed_s: float, peers: int, counters: dict[str, int | float]
) -> m.RunResult:
    """The RunResult for a finished root: its encoded value, or the error it raised (a value
    too large for one message is an error too: the compute side said so)."""
    root = run.root
    assert root is not None
    run_id = run.info.run_id
    exc = root.error
    if exc is None and isinstance(root.value, codec.Encoded):
        return m.RunResult(run_id, root.value.data, None, elapsed_s, peers, counters)
    if exc is None:
        exc = RuntimeError(f"the root of {run_id} finished without an encoded value")
    return m.RunResult(run_id, None, error_info(exc), elapsed_s, peers, counters)


def suspend(state: PeerState, run_id: str, now: float) -> Effects:
    """Stop a run this peer masters so that `resume` can continue it from checkpoints: every
    peer drops its frames and flushes its log; the submitter is told.

    Raises:
        RunRefused: this peer is not the master of a running run of that id.
    """
    runs = state.runs
    run = runs.active.get(run_id)
    if run is None or run.info.master != state.name or run.status != RUNNING:
        master = runs.master_of(run_id, state.name)
        where = f"its master is {master}" if master else "no such run"
        raise RunRefused(f"peer {state.name} masters no running run {run_id} ({where})")
    elapsed = run.elapsed(now)
    fx = drop(state, run_id)
    suspended = m.RunAnnounce(run.info, SUSPENDED)
    runs.remember_ended(suspended)
    runs.suspended[run_id] = run.info.epoch
    fx += announce(state, suspended)
    if run.submitter is not None:
        peers = len(state.members())
        fx.append(Send(run.submitter, stopped_result(run_id, SUSPENDED, elapsed, peers)))
    fx.append(WakeWaiters(run_id))
    state.note(INFO, __name__, "run %s suspended; `satind resume %s` continues it", run_id, run_id)
    return fx + start_next(state, now) + [Changed()]


def cancel(state: PeerState, run_id: str, now: float) -> Effects:
    """Cancel a run this peer masters, running or queued: every peer drops it (its queued
    jobs, the frames that wait for it, custody, orphans; nothing is restarted, kept or
    logged: a cancelled run's jobs are over, ``RunState.aborted``), its end is final in the
    checkpoint logs (a resume refuses it), and the submitter and waiters are told.

    Raises:
        RunRefused: this peer masters no running or queued run of that id.
    """
    runs = state.runs
    queued = next((r for r in runs.queue if r.info.run_id == run_id), None)
    run = runs.active.get(run_id) if queued is None else queued
    if run is None or run.info.master != state.name:
        status = runs.status_of(run_id)
        if status in (DONE, FAILED, SUSPENDED, CANCELLED):
            raise RunRefused(f"run {run_id} is over ({status}): nothing to cancel")
        master = runs.master_of(run_id, state.name)
        where = f"its master is {master}" if master else "no such run"
        raise RunRefused(f"peer {state.name} masters no running run {run_id} ({where})")
    if queued is not None:
        runs.queue.remove(queued)
        fx: Effects = []
        elapsed = 0.0
    else:
        fx = drop(state, run_id)
        elapsed = run.elapsed(now)
    result = stopped_result(run_id, CANCELLED, elapsed, len(state.members()))
    state.runs.keep(Finished(result, run.info, now), now)  # `satind result` says why
    cancelled = m.RunAnnounce(run.info, CANCELLED)
    runs.remember_ended(cancelled)
    runs.count_end(CANCELLED)
    fx += announce(state, cancelled)
    fx += copies(state, run.info, CANCELLED, result)
    if run.submitter is not None:
        fx.append(Send(run.submitter, result))
    fx += [WakeWaiters(run_id), Remember(run_id)]
    state.note(INFO, __name__, "run %s cancelled", run_id)
    return fx + start_next(state, now) + [Changed()]


def copies(state: PeerState, info: m.RunInfo, status: str, result: m.RunResult) -> Effects:
    """Send a finished run's result to ``run.result_copies`` other members to keep, so that
    it outlives this master (drained, crashed). The run's arguments stay here (a copy is
    for `satind result` and `status`)."""
    copy = m.ResultCopy(dataclasses.replace(info, args=b""), status, result)
    return [Send(name, copy) for name in copy_holders(state, info)]


def copy_holders(state: PeerState, info: m.RunInfo) -> list[str]:
    """The members that keep copies of a run's result: members of other machines first (a
    machine's crash takes all its peers, and they share its run history file), then of this
    one; which of them depends on the run, so that copies spread over the members."""
    node = state.name.split("/", 1)[0]
    others = sorted(state.others())
    far = [name for name in others if name.split("/", 1)[0] != node]
    near = [name for name in others if name.split("/", 1)[0] == node]
    count = state.cfg.run.result_copies
    rng = seeded(info.run_id)
    chosen = rng.sample(far, min(count, len(far)))
    return chosen + rng.sample(near, min(count - len(chosen), len(near)))


def on_result_copy(state: PeerState, msg: m.ResultCopy, now: float) -> Effects:
    """Keep a copy of a finished run's result. The copy may come before the news of the
    run's end: it is that news too (the run is dropped here if it was still live)."""
    if msg.state not in FINAL:
        return []
    fx = on_announces(state, [m.RunAnnounce(msg.info, msg.state)], now)
    state.runs.keep(Finished(msg.result, msg.info, now), now)
    return [*fx, WakeWaiters(msg.info.run_id), Remember(msg.info.run_id)]


def lookup_result(state: PeerState, run_id: str) -> tuple[m.RunResult | None, str, bool]:
    """A run's result as this peer knows it: (result, why there is none, whether the run is
    still pending here, so that a waiter should wait for it)."""
    runs = state.runs
    finished = runs.finished.get(run_id)
    if finished is not None:
        finished.fetched = True
        return finished.result, "", False
    status = runs.status_of(run_id)
    pending = status in (RUNNING, QUEUED)
    master = runs.master_of(run_id, state.name)
    if master is not None and master != state.name:
        return None, f"moved: run {run_id} is now mastered by {master}", False
    if pending:
        return None, f"run {run_id} is still {status}", True
    if run_id in runs.ended:
        return None, f"run {run_id} ended, but its result is no longer kept here", False
    return None, f"no run {run_id} here", False


def on_share(state: PeerState, msg: m.RunShare) -> Effects:
    """A member that drained and left sent its share of a run's counters: it is counted when
    the run ends (the member is not there to be asked then)."""
    run = state.runs.active.get(msg.run_id)
    if run is not None and run.info.master == state.name:
        run.departed = stats.total([run.departed, msg.counters])
    return []


def on_run_stats(state: PeerState, link: Link, msg: m.RunStatsRequest) -> Effects:
    """A master asks for this peer's share of a run's counters."""
    counters = stats.as_ints(state.run_counters(msg.run_id))
    return [Reply(link, m.RunStatsReply(msg.req, msg.run_id, counters))]
