"""The node's side of the run history (node/history.py): what a peer records when a run's
result is kept here, and how it answers `satind runs`, and `result` and `logs` for runs from
before a restart.

The file and the peer's writer to it (``Recorder``) are node/history.py.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from typing import Protocol

import trio

from satind.core import master
from satind.core.effects import Link
from satind.core.runs import ENDED, Finished
from satind.net import messages as m
from satind.net import tls
from satind.net.names import slot_of
from satind.node import permissions
from satind.node.history import Entry, HistoryError
from satind.node.host import Host
from satind.node.rpc import ask

log = logging.getLogger(__name__)


class Lines(Protocol):
    def since(self, run_id: str, start: int) -> tuple[list[tuple[float, str]], int]: ...


class RecorderHost(Host, Protocol):
    """A peer with run logs (node/logs.py), whose tail its records keep, and the masters it
    saw each run have (node/tracing.py)."""

    def masters_of(self, run_id: str) -> list[str]: ...

    @property
    def logs(self) -> Lines: ...


# -- recording --------------------------------------------------------------------------------


def remember(peer: RecorderHost, run_id: str) -> None:
    """A run's result was kept here (its master's, or a copy): record it. Its master waits
    ``history.record_delay_s`` for the last lines of output, then sends them to the members
    that keep copies (HistoryLog)."""
    finished = peer.state.runs.finished.get(run_id)
    if finished is None or peer.recorder.store is None:
        return
    if slot_of(finished.info.master) == slot_of(peer.name):
        peer.spawn_task(_as_master, peer, run_id)
    else:
        peer.recorder.add(Entry(_record(peer, finished, []), finished.result))


async def _as_master(peer: RecorderHost, run_id: str) -> None:
    await trio.sleep(peer.cfg.history.record_delay_s)
    finished = peer.state.runs.finished.get(run_id)
    if finished is None:
        return
    stamped, _ = peer.logs.since(run_id, 0)
    tail = stamped[-peer.cfg.history.log_lines :]
    lines, times = [line for _, line in tail], [at for at, _ in tail]
    record = dataclasses.replace(_record(peer, finished, lines), log_times=times)
    peer.recorder.add(Entry(record, finished.result))
    if tail:
        for name in master.copy_holders(peer.state, finished.info):
            peer.post(name, m.HistoryLog(run_id, lines, times))


def on_history_log(peer: RecorderHost, link: Link, msg: m.HistoryLog) -> None:
    """A master's lines of a run whose result copy this peer keeps: added to its record (a
    record of the lines alone adds to one that exists, never makes one)."""
    keep = peer.cfg.history.log_lines
    lines = [line[: peer.cfg.run.log_line_chars] for line in msg.lines][-keep:]
    times = ([float(at) for at in msg.times] + [0.0] * len(lines))[: len(lines)]
    stub = m.RunRecord(msg.run_id[:100], "", [], "", "", [], "", 0.0, 0.0, 0.0)
    peer.recorder.add(Entry(dataclasses.replace(stub, log=lines, log_times=times)))


def _record(peer: RecorderHost, finished: Finished, tail: Sequence[str]) -> m.RunRecord:
    """What the history keeps of a finished run, its times made wall-clock."""
    info, result = finished.info, finished.result
    last = f"{slot_of(info.master)}@{info.epoch}"
    ended = time.time() - max(0.0, peer.now() - finished.at)
    state = peer.state.runs.status_of(info.run_id)
    if state not in ENDED:
        state = "done" if result.error is None else "failed"
    error = result.error.message.splitlines()[0][:300] if result.error is not None else ""
    return m.RunRecord(
        run_id=info.run_id,
        plugin=info.plugin,
        argv=list(info.argv),
        code_hash=info.code_hash,
        owner=info.owner,
        masters=list(dict.fromkeys([*peer.masters_of(info.run_id), last])),
        state=state,
        started_at=round(ended - result.elapsed_s - result.finish_s, 3),
        ended_at=round(ended, 3),
        elapsed_s=result.elapsed_s,
        check=result.check,
        error=error,
        stats=dict(result.stats),
        log=list(tail),
        recorded_by=slot_of(peer.name),
    )


# -- answering --------------------------------------------------------------------------------


async def result_of(peer: Host, run_id: str) -> m.RunResult | None:
    """A run's result from this machine's history (None: not recorded, or no history)."""
    store = peer.recorder.store
    if store is None:
        return None
    try:
        return await peer.recorder.read(store.result, run_id)
    except HistoryError as exc:
        log.warning("run history: %s", exc)
        return None


def on_history_request(peer: RecorderHost, link: Link, msg: m.HistoryRequest) -> None:
    # A client with the submit grant only lists its own runs (node/permissions.py).
    remote = link.remote
    owner = ""
    if (
        remote is not None
        and remote.role == tls.ROLE_CLIENT
        and tls.GRANT_OPERATE not in remote.grants
    ):
        owner = permissions.client_name(link)

    async def answer() -> None:
        records, error = await gather(peer, msg, owner)
        link.post(m.HistoryReply(msg.req, records, error))

    peer.spawn_answer(link, msg.req, answer)


async def gather(
    peer: Host, msg: m.HistoryRequest, owner: str = ""
) -> tuple[list[m.RunRecord], str]:
    """The runs ``msg`` asks for: this machine's, and unless ``msg.local`` every other
    machine's (one live peer each) and the runs going on now, merged by run id."""
    records, error = await _local(peer, msg, owner)
    if msg.local:
        return records, error
    found = {r.run_id: r for r in records}
    limit = max(1, min(msg.limit, 10_000))
    asked = m.HistoryRequest(0, msg.run_id, msg.states, msg.since, limit, local=True)

    async def one(name: str) -> None:
        reply = await ask(
            peer,
            name,
            lambda req: dataclasses.replace(asked, req=req),
            m.HistoryReply,
            peer.cfg.run.copy_lookup_s,
        )
        for record in reply.runs if reply is not None else []:
            if owner and record.owner != owner:
                continue
            found[record.run_id] = better(found.get(record.run_id), record)

    async with trio.open_nursery() as nursery:
        for name in _one_per_machine(peer):
            nursery.start_soon(one, name)
    for record in _live(peer, msg, owner):
        found.setdefault(record.run_id, record)
    out = sorted(found.values(), key=lambda r: (r.state not in ENDED, r.ended_at), reverse=True)
    return out[:limit], error


def better(old: m.RunRecord | None, new: m.RunRecord) -> m.RunRecord:
    """Of two records of one run (from two machines), the one with the longer log, else the
    one a master of the run wrote; their masters together."""
    if old is None:
        return new

    def rank(r: m.RunRecord) -> tuple[int, bool]:
        return len(r.log), any(master.startswith(f"{r.recorded_by}@") for master in r.masters)

    best = new if rank(new) > rank(old) else old
    masters = list(dict.fromkeys([*old.masters, *new.masters]))
    return dataclasses.replace(best, masters=masters)


async def _local(peer: Host, msg: m.HistoryRequest, owner: str) -> tuple[list[m.RunRecord], str]:
    store = peer.recorder.store
    try:
        if store is None:
            raise HistoryError(peer.recorder.error)
        if msg.run_id:
            record = await peer.recorder.read(store.get, msg.run_id)
            found = [record] if record is not None and owner in ("", record.owner) else []
            return found, ""
        limit = max(1, min(msg.limit, 10_000))
        return await peer.recorder.read(store.query, msg.states, msg.since, limit, owner), ""
    except HistoryError as exc:
        return [], f"{slot_of(peer.name)}: {exc}"


def _one_per_machine(peer: Host) -> list[str]:
    """A live member of every other machine (they share their machine's history file)."""
    mine = slot_of(peer.name).split("/")[0]
    chosen: dict[str, str] = {}
    for member in peer.table.alive():
        node = member.slot.split("/")[0]
        if node != mine and node not in chosen:
            chosen[node] = member.name
    return list(chosen.values())


def _live(peer: Host, msg: m.HistoryRequest, owner: str) -> list[m.RunRecord]:
    """The runs going on (or queued) as this peer knows them, for the listing."""
    out = []
    for announce in peer.state.runs.announcements():
        info = announce.info
        if announce.state in ENDED or (owner and info.owner != owner):
            continue
        if msg.run_id and info.run_id != msg.run_id:
            continue
        if msg.states and announce.state not in msg.states:
            continue
        out.append(
            m.RunRecord(
                run_id=info.run_id,
                plugin=info.plugin,
                argv=list(info.argv),
                code_hash=info.code_hash,
                owner=info.owner,
                masters=[f"{slot_of(info.master)}@{info.epoch}"],
                state=announce.state,
                started_at=0.0,
                ended_at=0.0,
                elapsed_s=0.0,
            )
        )
    return out
