"""What `satind status` shows: each peer's line, each run's line.

A peer answers a status request for itself (its own line, then its view of every other
member's state) or, when asked deep, for the whole system: it asks every member for its own
line and its share of every run, and adds the shares up onto the master's line for each run
(``merge_runs``). A client without the operate grant sees the arguments of its own runs only
(``permissions.shown_to``).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import satind.stats as stats
from satind.core.effects import Link
from satind.core.runs import DONE, FAILED, QUEUED
from satind.membership.view import Member
from satind.net import messages as m
from satind.net.names import slot_of
from satind.node import permissions
from satind.node.host import Host
from satind.node.rpc import ask_all

if TYPE_CHECKING:
    from satind.core.state import PeerState

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
        runs = permissions.shown_to(link, peer.state, local_runs(peer))
        link.post(m.StatusReply(msg.req, peers, runs))
        return
    peer.spawn_answer(link, msg.req, _deep, peer, link, msg)


async def _deep(peer: Host, link: Link, msg: m.StatusRequest) -> None:
    peers, runs = await gather(peer)
    # Only an operator sees every run's arguments (node/permissions.py).
    link.post(m.StatusReply(msg.req, peers, permissions.shown_to(link, peer.state, runs)))


async def gather(peer: Host) -> tuple[list[m.PeerStatus], list[m.RunStatus]]:
    """The whole system's status as this peer gathers it: every member's own line (its view
    for those that do not answer in time) and every run's, summed up from its shares."""
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
    return sorted(peers, key=lambda p: p.name), merge_runs(runs)


def status_json(reply: m.StatusReply) -> dict[str, Any]:
    """A status as JSON (`satind status --json`, the dashboard's snapshots)."""
    return {
        # "slot": the name the daemon gives the peer (b/0), whichever process runs there now
        # ("name", b/0#k2j9x1: membership/view.py).
        "peers": [{**dataclasses.asdict(p), "slot": slot_of(p.name)} for p in reply.peers],
        "runs": [
            {**vars(r), "progress": round(r.progress, 4), "elapsed_s": round(r.elapsed_s, 3)}
            for r in reply.runs
        ],
    }


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
        decisions=peer.decisions(),
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
        run_id = run.info.run_id
        extra: dict[str, int | float] | None = None
        progress = 0.0  # a divide-and-conquer run's: the members' shares (merge_runs)
        iteration, iterations = iteration_of(state, run_id)
        if iteration >= 0:
            extra = {"iteration": iteration}
        if iterations > 0:
            extra = {**(extra or {}), "iterations": iterations}
            progress = min(iteration / iterations, 1.0)
        place = state.spmd.runs.get(run_id)
        if place is not None:  # an SPMD run: the entities it moved
            extra = {**(extra or {}), "entity_moves": place.moves}
        out.append(_row(run.info, run.status, progress, run.elapsed(now), extra))
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


def iteration_of(state: PeerState, run_id: str) -> tuple[int, int]:
    """An iterative or SPMD run's iterations done and how many it makes (0: not known
    beforehand — an iterative run stops when its plugin says), as this peer knows them: its
    master follows every iteration, the other members the barriers. (-1, 0) for a
    divide-and-conquer run, or one this peer does not know."""
    run = state.runs.active.get(run_id)
    if run is None or run.plugin is None or run.plugin.kind == "divide-and-conquer":
        return -1, 0
    place = state.spmd.runs.get(run_id)
    if place is not None:
        return place.iteration, place.iterations
    barrier = state.iterative.barriers.get(run_id)
    return (barrier[1] if barrier is not None else 0), 0


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
            if "iterations" in head.counters:
                progress = head.progress  # of its iterations (job ids say nothing there)
            head = m.RunStatus(
                head.run_id,
                head.plugin,
                head.argv,
                head.master,
                head.state,
                min(progress, 1.0),
                head.elapsed_s,
                stats.as_ints(total),
                waiting=stats.waiting_for_peers(head.state, total),
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
