"""A lost member's checkpoint log on the network side (the rule is core/logged.py): reading it
for the jobs about to restart (``ReadLog``), keeping copies of other members' logs
(``LogCopy``, ``[checkpoint] copies``), and answering a survivor that asks a copy for the
results below its restarted jobs (``LogQuery``).

File work runs off the trio thread (node/checkpoint.py's store). What is read goes to the core
as ``LogRead`` within ``[checkpoint] read_wait_s``, empty when nothing could be read: a lost
log only costs recomputation.
"""

from __future__ import annotations

import logging

import trio

from satind.core.effects import Link, ReadLog
from satind.core.handle import handle
from satind.core.logged import LogRead
from satind.net import messages as m
from satind.net.names import slot_of
from satind.node.host import Host
from satind.node.rpc import ask
from satind.recovery.checkpoint import MAX_COPY, at_or_below, below

log = logging.getLogger(__name__)


async def read(peer: Host, fx: ReadLog) -> None:
    """Read what ``fx.peer`` logged below the held jobs (here, else from a keeper of a copy)
    and report it to the core — always, whatever happens, within ``read_wait_s``: the held
    jobs are released by the report alone."""
    results: list[m.JobResult] = []
    source = error = ""
    wait = peer.cfg.checkpoint.read_wait_s
    try:
        with trio.move_on_after(wait) as scope:
            results, source, error = await _read(peer, fx, wait)
        if scope.cancelled_caught:
            results, source = [], ""
            error = f"not read within [checkpoint] read_wait_s = {wait:g} s"
    except Exception as exc:  # a bug or a bad disk must not keep the jobs held
        log.exception("reading %s's checkpoint log failed", fx.peer)
        results, source, error = [], "", f"reading it failed: {exc!r}"
    finally:
        event = LogRead(fx.token, fx.peer, results, source, error)
        peer.apply(handle(peer.state, event, peer.now()))


async def _read(peer: Host, fx: ReadLog, wait: float) -> tuple[list[m.JobResult], str, str]:
    store = peer.checkpointer.store
    slot = slot_of(fx.peer)
    results: list[m.JobResult] = []
    error = ""
    if store is not None:
        try:
            contents, found_log = await store.read(slot)
        except OSError as exc:
            error = f"cannot read it in {store.where}: {exc}"
        else:
            results = below(contents, fx.wanted)
            if found_log or results:
                return results, store.where, ""
    runs = [run for run, _ in fx.wanted]
    paths = [path for _, path in fx.wanted]
    asked = {(run, path) for run, path in fx.wanted}
    for keeper in fx.keepers:
        reply = await ask(
            peer, keeper, lambda req: m.LogQuery(req, slot, runs, paths), m.LogReply, wait
        )
        if reply is None:
            error = f"{keeper} did not answer"
        elif reply.error:
            error = f"{keeper}: {reply.error}"
        else:
            # Only what was asked for: a result of another run, or outside the held jobs'
            # subtrees, is not the keeper's to give.
            got = at_or_below(reply.results, asked)
            return got, keeper, ""
    if not error:
        error = "no log of it here" + (" nor on " + ", ".join(fx.keepers) if fx.keepers else "")
    return [], "", error


def on_log_copy(peer: Host, link: Link, msg: m.LogCopy) -> None:
    """A member sends records of its log for this peer to keep (kept in order of arrival:
    node/checkpoint.py ``Checkpointer.keep``)."""
    if peer.checkpointer.store is None:
        return  # checkpoints are off here: a survivor that asks is told so
    if msg.peer != slot_of(link.remote_name):
        log.warning("%s sent a copy of %s's log: dropped", link.remote_name, msg.peer)
        return
    peer.checkpointer.keep(msg.peer, msg.records, msg.reset)


def on_log_query(peer: Host, link: Link, msg: m.LogQuery) -> None:
    peer.spawn_answer(link, msg.req, _answer, peer, link, msg)


async def _answer(peer: Host, link: Link, msg: m.LogQuery) -> None:
    store = peer.checkpointer.store
    if store is None:
        link.post(m.LogReply(msg.req, error=f"{peer.name} keeps no checkpoint logs"))
        return
    if len(msg.runs) != len(msg.paths):
        link.post(m.LogReply(msg.req, error="runs and paths differ in length"))
        return
    contents, has = await store.read(msg.peer)
    if not has:
        # Not a keeper of it (the asker's view of the members differs): it asks the next.
        link.post(m.LogReply(msg.req, error=f"{peer.name} keeps no copy of {msg.peer}'s log"))
        return
    results: list[m.JobResult] = []
    size = 0
    # The biggest subtrees first (the shortest paths), under the frame cap: what does not fit
    # is computed again.
    for result in sorted(
        below(contents, zip(msg.runs, msg.paths, strict=True)), key=lambda r: len(r.path)
    ):
        size += len(result.value or b"") + len(result.path) + 64
        if size > MAX_COPY:
            break
        results.append(result)
    link.post(m.LogReply(msg.req, results))
