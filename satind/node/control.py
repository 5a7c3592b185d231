"""The node's procedures that wait: what clients ask of a peer, and the steps of a run that
need other members' answers.

Each one gathers what it needs — an answer from the run's master, every member's share of a
run's counters, a checkpoint directory's logs, a plugin's parsed arguments (plugin code, so
in a worker thread) — and then hands the decision to the core as an event (core/events.py:
``SubmissionParsed``, ``RunJudged``, ``ResumeLoaded``, ...) and applies its effects. What
operators ask beside runs (drain, stop, reclaim) is node/operators.py's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

import satind.plugin as plugins
import satind.stats as stats
from satind.core import admission, master, victim
from satind.core.effects import EncodeArgs, Link
from satind.core.events import (
    ArgsEncoded,
    CancelAsked,
    CheckpointsFound,
    MasterAnswered,
    ResumeLoaded,
    RunJudged,
    SubmissionParsed,
    SuspendAsked,
)
from satind.core.handle import handle
from satind.core.runs import RunRefused
from satind.descriptor import Verdict
from satind.net import codec, tls
from satind.net import messages as m
from satind.node import parsing, permissions, recorder, shipping, status
from satind.node.host import Host
from satind.node.rpc import ask, ask_all
from satind.plugin import hooks
from satind.work.errors import error_info

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)


# -- a run's end and its statistics --------------------------------------------------------------


async def finish_run(peer: Host, run_id: str) -> None:
    """The root finished: gather every member's share of the counters, then end the run.
    The run's time ends now; what follows (statistics, the plugin's check) is reported apart."""
    ended = peer.now()
    answers = await ask_all(
        peer,
        lambda req: m.RunStatsRequest(req, run_id),
        m.RunStatsReply,
        peer.cfg.run.stats_timeout_s,
    )
    shares = [dict(reply.counters) for _, reply in answers]
    verdict = await _judge(peer, run_id)
    peer.apply(handle(peer.state, RunJudged(run_id, shares, verdict, ended), peer.now()))


async def _judge(peer: Host, run_id: str) -> Verdict | None:
    """The plugin's check and report of a finished run's value, made here, its master (so
    that what the user sees does not depend on where they submitted from)."""
    run = peer.state.runs.active.get(run_id)
    if run is None or run.plugin is None or run.root is None or run.root.error is not None:
        return None
    value = run.root.value
    if not isinstance(value, codec.Encoded):
        return None
    net = peer.cfg.net
    return await peer.compute.run_plugin(
        hooks.judge,
        run.plugin,
        run.info,
        value.data,
        net.max_depth,
        net.max_frame_bytes,
        peer.cfg.files,
        peer.name,
    )


async def check_run(peer: Host, run_id: str) -> None:
    """Ask the master of a run we still track whether it is over (every notice may have been
    lost)."""
    owner = peer.state.runs.master_of(run_id, peer.name)
    if owner is None or owner == peer.name:
        return
    reply = await ask(
        peer,
        owner,
        lambda req: m.ResultRequest(req, run_id, False),
        m.ResultReply,
        peer.cfg.client.timeout_s,
    )
    peer.apply(handle(peer.state, MasterAnswered(run_id, reply), peer.now()))


# -- results ------------------------------------------------------------------------------------


async def fetch_result(
    peer: Host, run_id: str, wait: bool, here: bool = False
) -> tuple[m.RunResult | None, str]:
    """A run's result (or why there is none): a copy we keep, ours if we master the run, else
    the master's, relayed; when the master is gone (drained, crashed) or the run unknown here,
    a copy some member keeps (``run.result_copies``). When waiting, follow the run to
    whichever peer masters it. ``here``: what this peer holds, nothing asked or awaited."""
    while True:
        runs = peer.state.runs
        owner = runs.master_of(run_id, peer.name)
        if here or run_id in runs.finished or owner is None or owner == peer.name:
            result, why, pending = master.lookup_result(peer.state, run_id)
            if result is None and not pending:
                # Ended before this peer (re)started, or no longer kept in memory: this
                # machine's run history may have it (node/recorder.py).
                result = await recorder.result_of(peer, run_id)
            if here or result is not None:
                return result, "" if result is not None else why
            if wait and pending:
                event = trio.Event()
                peer.result_waiters.setdefault(run_id, []).append(event)
                await event.wait()
                continue  # done here, or moved to another master: look again
            if owner is None or run_id in runs.ended:
                found = await _copy_from_members(peer, run_id)
                if found is not None:
                    return found, ""
            if owner is None:
                # "no run ...": a client that follows a run after losing its master asks
                # again (this peer may be new, a restarted one, and not know the run yet).
                why = (
                    f"no run {run_id} known to {peer.name}, and no member of the system keeps "
                    "its result (run ids are printed by `satind submit` and listed by "
                    "`satind status`)"
                )
            return None, why
        if peer.state.is_gone(owner) and not wait:
            # The master was drained or crashed: a member keeps a copy of a finished run's
            # result; a run still going is taken over by an elected master.
            found = await _copy_from_members(peer, run_id)
            if found is not None:
                return found, ""
            if runs.status_of(run_id) in ("running", "queued"):
                return None, (
                    f"run {run_id}: its master {owner} is gone and a survivor takes the run "
                    "over; ask again with --wait"
                )
            # This peer's view may be wrong (it was paused, or cut off): ask the master anyway.
        # Ask the master and relay its answer. When waiting, ask again now and then: the
        # master may be lost and another elected meanwhile.
        reply = await ask(
            peer,
            owner,
            lambda req: m.ResultRequest(req, run_id, wait),
            m.ResultReply,
            peer.cfg.steal.custody_check_s,
        )
        if reply is not None and reply.result is not None:
            return reply.result, reply.error
        if reply is None or reply.error.startswith("no run"):
            # The master is not (yet) known to be gone but did not answer, or restarted and
            # forgot the run: a member may keep a copy.
            found = await _copy_from_members(peer, run_id)
            if found is not None:
                return found, ""
        if reply is not None and (not wait or not reply.error.startswith("no run")):
            return reply.result, reply.error
        if not wait:
            return None, f"master {owner} did not answer, and no member keeps the result"


async def _copy_from_members(peer: Host, run_id: str) -> m.RunResult | None:
    """A copy of a finished run's result that another member keeps, or None."""
    answers = await ask_all(
        peer,
        lambda req: m.ResultRequest(req, run_id, False, here=True),
        m.ResultReply,
        peer.cfg.run.copy_lookup_s,
    )
    return next((reply.result for _, reply in answers if reply.result is not None), None)


async def forward_result(peer: Host, run_id: str, dest: str) -> None:
    """Send ``dest`` (a submitter that waits here) the run's result once its master has it."""
    result, why = await fetch_result(peer, run_id, True)
    if result is not None:
        peer.post(dest, result)
    else:
        log.warning("cannot forward the result of %s to %s: %s", run_id, dest, why)


def on_result_request(peer: Host, link: Link, msg: m.ResultRequest) -> None:
    async def answer() -> None:
        result, why = await fetch_result(peer, msg.run_id, msg.wait, msg.here)
        link.post(m.ResultReply(msg.req, result, why))

    peer.spawn_answer(link, msg.req, answer)


def on_progress(peer: Host, link: Link, msg: m.ProgressRequest) -> None:
    async def answer() -> None:
        if msg.run_id not in peer.state.runs.active:
            link.post(m.ProgressReply(msg.req, msg.run_id, -1.0, {}))
            return
        answers = await ask_all(
            peer,
            lambda req: m.RunStatsRequest(req, msg.run_id),
            m.RunStatsReply,
            peer.cfg.run.progress_poll_s,
        )
        total = stats.total(
            [peer.state.run_counters(msg.run_id), *(dict(r.counters) for _, r in answers)]
        )
        progress = float(total.pop("progress", 0.0))
        iteration, iterations = status.iteration_of(peer.state, msg.run_id)
        if iterations > 0:
            # Job ids say nothing of an iterative run's progress: each iteration's jobs are
            # a new set of children of the root (its tree is "done" after the first).
            progress = iteration / iterations
        reply = m.ProgressReply(
            msg.req, msg.run_id, min(progress, 1.0), stats.as_ints(total), iteration, iterations
        )
        link.post(reply)

    peer.spawn_answer(link, msg.req, answer)


# -- submit, resume, suspend ----------------------------------------------------------------------


def on_submit(peer: parsing.ParsingHost, link: Link, msg: m.Submit) -> None:
    if why := m.weight_problem(msg.weight):  # before any code is shipped or parsed
        link.post(m.Submitted(msg.req, "", m.ErrorInfo("RunRefused", why)))
        return
    if msg.files:
        # Its code first (node/shipping.py): checked, stored, vetted, loaded; then as below.
        async def ship_then_submit() -> None:
            why = await shipping.receive(peer, link, msg)
            if why:
                link.post(m.Submitted(msg.req, "", m.ErrorInfo("RunRefused", why)))
            else:
                _submit_loaded(peer, link, msg)

        peer.spawn_answer(link, msg.req, ship_then_submit)
        return
    _submit_loaded(peer, link, msg)


def _submit_loaded(peer: parsing.ParsingHost, link: Link, msg: m.Submit) -> None:
    """A submission whose plugin code is here: checked, parsed in a thread, then accepted."""
    try:
        plugin = admission.check_submission(peer.state, msg)
    except (plugins.UnknownPlugin, plugins.UsageError, RunRefused) as exc:
        link.post(m.Submitted(msg.req, "", error_info(exc)))
        return

    async def parse_then_submit() -> None:
        # The plugin's own code (parse, branching, encoding the arguments) runs in a thread
        # of its own, bounded in time and per client (node/parsing.py): the network side
        # keeps answering probes, and other clients are served, whatever it does.
        parsed = await parsing.parse(peer, link, msg, plugin)
        peer.apply(handle(peer.state, SubmissionParsed(link, msg, parsed), peer.now()))

    peer.spawn_answer(link, msg.req, parse_then_submit)


def on_resume_request(peer: Host, link: Link, msg: m.ResumeRequest) -> None:
    async def answer() -> None:
        store = peer.checkpointer.store
        if store is None:
            why = f"peer {peer.name} has no checkpoint directory ([checkpoint] dir)"
            link.post(m.Submitted(msg.req, "", m.ErrorInfo("RunRefused", why)))
            return
        contents = await store.load()
        for problem in contents.problems:
            log.warning("checkpoint: %s", problem)
        info = contents.runs.get(msg.run_id)
        if info is None:
            why = f"no checkpoint of run {msg.run_id} in {store.where}"
            link.post(m.Submitted(msg.req, "", m.ErrorInfo("RunRefused", why)))
            return
        if link.remote is not None and link.remote.role == "client":
            who = permissions.client_name(link)
            grants = link.remote.grants
            # Its owner is known only now, from the checkpoint (node/permissions.py).
            if tls.GRANT_OPERATE not in grants and info.owner != who:
                why = (
                    f"client {who} may resume only its own runs, and run {msg.run_id} was "
                    f"submitted by {info.owner or 'a client of an older version'}; that takes "
                    f"the {tls.GRANT_OPERATE!r} grant"
                )
                link.post(m.Submitted(msg.req, "", m.ErrorInfo("NotAllowed", why)))
                return
        results = list(contents.results.get(msg.run_id, {}).values())
        barrier = contents.barriers.get(msg.run_id)
        loaded = ResumeLoaded(link, msg.req, info, results, barrier)
        peer.apply(handle(peer.state, loaded, peer.now()))

    peer.spawn_answer(link, msg.req, answer)


def on_suspend_request(peer: Host, link: Link, msg: m.SuspendRequest) -> None:
    async def answer() -> None:
        if await _at_master(peer, link, msg, lambda req: m.SuspendRequest(req, msg.run_id)):
            return
        if not peer.checkpointer.enabled:
            why = (
                f"peer {peer.name} has no checkpoint directory: a suspended run is resumed "
                "from checkpoints (start the peers with --checkpoint-dir)"
            )
            link.post(m.ControlReply(msg.req, False, why))
            return
        try:
            peer.apply(handle(peer.state, SuspendAsked(msg.run_id), peer.now()))
        except RunRefused as exc:
            link.post(m.ControlReply(msg.req, False, str(exc)))
            return
        await peer.checkpointer.flush()
        done = f"suspended {msg.run_id}; `satind resume {msg.run_id}` continues it"
        link.post(m.ControlReply(msg.req, True, done, [msg.run_id]))

    peer.spawn_answer(link, msg.req, answer)


def on_cancel_request(peer: Host, link: Link, msg: m.CancelRequest) -> None:
    async def answer() -> None:
        if await _at_master(peer, link, msg, lambda req: m.CancelRequest(req, msg.run_id)):
            return
        try:
            peer.apply(handle(peer.state, CancelAsked(msg.run_id), peer.now()))
        except RunRefused as exc:
            link.post(m.ControlReply(msg.req, False, str(exc)))
            return
        link.post(m.ControlReply(msg.req, True, f"cancelled {msg.run_id}", [msg.run_id]))

    peer.spawn_answer(link, msg.req, answer)


async def _at_master(
    peer: Host,
    link: Link,
    msg: m.SuspendRequest | m.CancelRequest,
    again: Callable[[int], m.Message],
) -> bool:
    """A request about a run that any peer takes: when another peer masters the run, ask it
    and pass its answer on. True when answered so (nothing more to do here)."""
    owner = peer.state.runs.master_of(msg.run_id, peer.name)
    if owner is None or owner == peer.name:
        return False
    reply = await ask(peer, owner, again, m.ControlReply, peer.cfg.client.timeout_s)
    if reply is not None:
        link.post(m.ControlReply(msg.req, reply.ok, reply.message, reply.affected))
    else:
        why = f"the master of {msg.run_id}, {owner}, did not answer"
        link.post(m.ControlReply(msg.req, False, why))
    return True


async def find_checkpointed_runs(peer: Host) -> None:
    """Runs the checkpoint directory could resume (listed by `status` until resumed)."""
    assert peer.checkpointer.store is not None
    contents = await peer.checkpointer.store.load()
    peer.apply(handle(peer.state, CheckpointsFound(dict(contents.unfinished())), peer.now()))
    if peer.state.checkpointed:
        log.info(
            "checkpoint directory %s holds %d unfinished run(s): %s (`satind resume RUN_ID`)",
            peer.checkpointer.store.where,
            len(peer.state.checkpointed),
            ", ".join(sorted(peer.state.checkpointed)),
        )


# -- stealing: large arguments --------------------------------------------------------------------


async def encode_and_hand_out(peer: Host, fx: EncodeArgs) -> None:
    """Encode a stolen job's large arguments in a worker thread, then hand it out."""
    args: bytes | codec.EncodeError
    refs: list[Any] = []
    try:
        args = await peer.compute.offload(
            codec.encode_value, fx.job.args, peer.cfg.net.max_frame_bytes, refs
        )
    except codec.EncodeError as exc:
        args = exc
    shared = victim.shared_ids(refs)
    encoded = ArgsEncoded(fx.link, fx.request, fx.job, args, shared)
    peer.apply(handle(peer.state, encoded, peer.now()))
