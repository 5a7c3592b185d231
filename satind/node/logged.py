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
from satind.recovery.checkpoint import MAX_COPY, below

log = logging.getLogger(__name__)


async def read(peer: Host, fx: ReadLog) -> None:
    """Read what ``fx.peer`` logged below the held jobs (here, else from a keeper of a copy)
    and report it to the core."""
    results: list[m.JobResult] = []
    source = error = ""
    store = peer.checkpointer.store
    slot = slot_of(fx.peer)
    wait = peer.cfg.checkpoint.read_wait_s
    with trio.move_on_after(wait) as scope:
        found_log = False
        if store is not None:
            try:
                contents, found_log = await store.read(slot)
            except OSError as exc:
                error = f"cannot read it in {store.where}: {exc}"
            else:
                results = below(contents, fx.wanted)
                source = store.where if found_log or results else ""
        runs = [run for run, _ in fx.wanted]
        paths = [path for _, path in fx.wanted]
        for keeper in () if found_log else fx.keepers:
            reply = await ask(
                peer, keeper, lambda req: m.LogQuery(req, slot, runs, paths), m.LogReply, wait
            )
            if reply is None:
                error = f"{keeper} did not answer"
            elif reply.error:
                error = f"{keeper}: {reply.error}"
            else:
                results, source, error = list(reply.results), keeper, ""
                break
        if not source and not error:
            error = "no log of it here" + (" nor on " + ", ".join(fx.keepers) if fx.keepers else "")
    if scope.cancelled_caught:
        error = f"not read within [checkpoint] read_wait_s = {wait:g} s"
    peer.apply(handle(peer.state, LogRead(fx.token, fx.peer, results, source, error), peer.now()))


def on_log_copy(peer: Host, link: Link, msg: m.LogCopy) -> None:
    """A member sends records of its log for this peer to keep."""
    store = peer.checkpointer.store
    if store is None:
        return  # checkpoints are off here: it asks the next keeper when this one fails
    if msg.peer != slot_of(link.remote_name):
        log.warning("%s sent a copy of %s's log: dropped", link.remote_name, msg.peer)
        return
    peer.spawn_task(_keep, peer, msg)


async def _keep(peer: Host, msg: m.LogCopy) -> None:
    store = peer.checkpointer.store
    assert store is not None
    try:
        await store.keep_copy(peer.options.name, msg.peer, msg.records, msg.reset)
    except OSError as exc:
        log.error("keeping a copy of %s's checkpoint log failed: %s", msg.peer, exc)


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
    contents, _ = await store.read(msg.peer)
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
