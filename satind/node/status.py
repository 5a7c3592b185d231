"""What `satind status` shows: each peer's line, each run's line.

A peer answers a status request for itself (its own line, then its view of every other
member's state) or, when asked deep, for the whole system: it asks every member for its own
line and its share of every run, and adds the shares up onto the master's line for each run
(``merge_runs``).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence

import satind.stats as stats
from satind.core.effects import Link
from satind.core.runs import DONE, FAILED, QUEUED
from satind.membership.view import Member
from satind.net import messages as m
from satind.node.host import Host
from satind.node.rpc import ask_all

# The state of a run's line that is one peer's share of it (summed onto the master's line).
PART = "part"


def on_status(peer: Host, link: Link, msg: m.StatusRequest) -> None:
    if not msg.deep:
        view = [
            m.PeerStatus(mem.name, mem.cluster, state_label(mem))
            for mem in peer.table.current()
            if mem.name != peer.name
        ]
        peers = with_availability(peer, [local_status(peer), *view])
        link.post(m.StatusReply(msg.req, peers, local_runs(peer)))
        return
    peer.spawn_answer(link, msg.req, _deep, peer, link, msg)


async def _deep(peer: Host, link: Link, msg: m.StatusRequest) -> None:
    peers = [local_status(peer)]
    runs = local_runs(peer)
    answers = await ask_all(
        peer, lambda req: m.StatusRequest(req, False), m.StatusReply, peer.cfg.run.stats_timeout_s
    )
    for _, reply in answers:
        if reply.peers:
            peers.append(reply.peers[0])  # its own line; the rest is its view
            runs.extend(reply.runs)
    answered = {p.name for p in peers}
    for member in peer.table.current():
        if member.name not in answered:
            peers.append(
                m.PeerStatus(
                    member.name, member.cluster, state_label(member), address=str(member.address)
                )
            )
    peers = with_availability(peer, peers)
    link.post(m.StatusReply(msg.req, sorted(peers, key=lambda p: p.name), merge_runs(runs)))


def with_availability(peer: Host, peers: list[m.PeerStatus]) -> list[m.PeerStatus]:
    """Each worker's availability as this peer's iterative scheduler estimates it — once it
    has watched it for ``iterative.shown_after_slots`` slots (before, it is mostly the prior)."""
    views = peer.state.iterative.workers
    enough = peer.cfg.iterative.shown_after_slots
    out = []
    for p in peers:
        view = views.get(p.name)
        if view is not None and view.estimator.observed() >= enough:
            up = view.estimator.chain().stationary()[0]
            p = dataclasses.replace(p, availability=round(up, 3))
        out.append(p)
    return out


def state_label(member: Member) -> str:
    if member.draining and member.alive:
        return "draining"
    return "reclaimed" if member.reclaimed and member.alive else member.state.label


def local_status(peer: Host) -> m.PeerStatus:
    state = peer.state
    counters = state.steal
    label = state.table.me.state.label
    if state.draining and not state.table.me.state.gone:
        label = "draining"
    elif state.reclaimed and not state.table.me.state.gone:
        label = "standby" if state.standby else "reclaimed"
    checkpoint = state.checkpoint
    last = peer.checkpointer.last_at
    return m.PeerStatus(
        name=peer.name,
        cluster=state.cluster,
        state=label,
        queue=len(state.queue),
        jobs_run=state.runs.jobs_run(),
        jobs_given=counters.jobs_given,
        stolen_local=counters.stolen_local,
        stolen_wide=counters.stolen_wide,
        steal_attempts_local=counters.steal_attempts_local,
        steal_attempts_wide=counters.steal_attempts_wide,
        cpu_percent=_cpu_percent(peer),
        rss_mb=_rss_mb(),
        runs=len(state.runs.active),
        checkpoint_policy=checkpoint.policy,
        checkpoint_bytes=checkpoint.bytes_written,
        checkpoint_age_s=-1.0 if last is None else round(peer.now() - last, 1),
        address=str(state.table.me.address),
        entities=len(state.spmd.held),
        not_serving=[
            f"{run_id}: {run.refused}"
            for run_id, run in state.runs.active.items()
            if run.refused is not None
        ],
        joined=peer.joined.is_set(),
    )


def _row(
    info: m.RunInfo,
    state: str,
    progress: float = 0.0,
    elapsed_s: float = 0.0,
    counters: dict[str, int | float] | None = None,
) -> m.RunStatus:
    return m.RunStatus(
        info.run_id,
        info.plugin,
        info.argv,
        info.master,
        state,
        progress,
        elapsed_s,
        counters or {},
    )


def local_runs(peer: Host) -> list[m.RunStatus]:
    """This peer's share of every active run (state "part"); the runs it masters (running,
    queued, and the results it keeps); and the unfinished runs of its checkpoint directory."""
    state = peer.state
    runs = state.runs
    now = peer.now()
    out = []
    for run in runs.active.values():
        counters = stats.as_ints(state.run_counters(run.info.run_id))
        progress = float(counters.pop("progress", 0.0))
        out.append(_row(run.info, PART, progress, 0.0, counters))
    for run in runs.mastered_by(peer.name):
        barrier = state.iterative.barriers.get(run.info.run_id)
        extra: dict[str, int | float] | None = (
            {"iteration": barrier[1]} if barrier is not None else None
        )
        place = state.spmd.runs.get(run.info.run_id)
        if place is not None:  # an SPMD run: its iteration, and the entities it moved
            extra = {"iteration": place.iteration, "entity_moves": place.moves}
        out.append(_row(run.info, run.status, 0.0, now - run.started, extra))
    out += [_row(run.info, QUEUED) for run in runs.queue]
    for finished in runs.finished.values():
        ok = finished.result.error is None
        ended = runs.ended.get(finished.info.run_id)  # "cancelled" is kept as a result too
        out.append(
            _row(
                finished.info,
                ended.state if ended is not None else DONE if ok else FAILED,
                1.0 if ok else 0.0,
                finished.result.elapsed_s,
                dict(finished.result.stats),
            )
        )
    for run_id, info in state.checkpointed.items():
        if run_id not in runs.active and runs.status_of(run_id) == "unknown":
            assert isinstance(info, m.RunInfo)
            out.append(_row(info, "checkpointed"))
    return out


def merge_runs(parts: Sequence[m.RunStatus]) -> list[m.RunStatus]:
    """Sum every peer's share of each run onto the master's line for it."""
    heads: dict[str, m.RunStatus] = {}
    shares: dict[str, list[m.RunStatus]] = {}
    for row in parts:
        if row.state == PART:
            shares.setdefault(row.run_id, []).append(row)
        else:
            heads[row.run_id] = row
    out = []
    for run_id, head in heads.items():
        if head.state == "running" and run_id in shares:
            total = stats.total(dict(s.counters) for s in shares[run_id])
            total.update(head.counters)  # the master's own: an iterative run's iteration
            progress = sum(s.progress for s in shares[run_id])
            head = m.RunStatus(
                head.run_id,
                head.plugin,
                head.argv,
                head.master,
                head.state,
                min(progress, 1.0),
                head.elapsed_s,
                stats.as_ints(total),
            )
        out.append(head)
    return sorted(out, key=lambda r: r.run_id)


def _cpu_percent(peer: Host) -> float:
    cpu, wall, last = peer._cpu
    now_cpu, now_wall = time.process_time(), time.monotonic()
    if now_wall - wall >= 0.5:
        last = 100.0 * (now_cpu - cpu) / (now_wall - wall)
        peer._cpu = (now_cpu, now_wall, last)
    return round(last, 1)


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)
    except (OSError, ValueError, IndexError):
        return 0.0
