"""Shared objects on the network side: replicas fetched on steal, global calls combined and
pushed, guards that wait and then fetch (satin-grid-programming-model §4.2; the API and the
compute side are satind/shared.py and engine/worker.py).

* **Replicas follow the work.** A stolen job lists the shared objects its arguments refer to
  (``JobSpec.shared``, recorded by the victim while it encodes them). A thief without a replica
  of one holds the job and asks the victim (``ReplicaRequest``); the victim's compute side
  encodes its replica at a safe point and it travels back (``ReplicaReply``); the job goes to
  the compute side after the replica. A lost request is sent again (``fetch_retry_s``).
* **Global calls are pushed, combined.** Each global call made here is queued with its
  sequence number (per object and sender) and, after ``combine_s`` or once ``combine_bytes``
  are waiting, everything queued goes to every other member in one ``SharedUpdates`` message
  each. A receiver hands them to its compute side, which applies each sender's calls in order
  and drops duplicates; a peer without a replica ignores them (it fetches one, with the
  state, when it needs it). Best effort: each call is pushed once.
* **Anti-entropy.** While it holds replicas, every ``digest_s`` a peer asks its compute side
  for a digest of them (``DigestWanted``) and sends it to one other member, each in turn; the
  member's compute side answers with the calls it lacks, or a whole replica, and its own digest
  back when the sender is ahead (engine/replication.py). Replicas converge though each call
  is pushed once.
* **Guards.** A stolen job whose guard is false is parked by the compute side, which re-checks
  it whenever updates or a replica arrive. If it still waits after ``guard_wait_s``, its
  replicas are fetched from its victim — the peer that ran its parent, whose replicas satisfy
  the guard (§4.2) — and again after each ``guard_wait_s`` until it runs. A lost update costs
  that wait, never a guard's correctness.
* **Results wait for their calls.** A result never overtakes the global calls of its subtree:
  when it is applied at its parent, the parent's replicas have applied every call the jobs
  below it made, wherever they ran. The thief sends its queued calls before the result
  (``job_finished`` flushes; one connection keeps them in order, and the receiver's mailbox
  applies them first), and the result carries what the thief had applied to the run's
  replicas (``JobResult.needs``; its own calls, and its subtree's, whose results waited for
  them there in turn). A receiver whose replicas lack some of it (a call from a third peer
  still on its way, or lost) holds the result; it is applied as soon as updates bring them.
  If it still waits after ``guard_wait_s``, the sender is asked for what we lack (our digest:
  it answers with the calls, or its whole replica), again and again, doubling up to
  ``fetch_retry_s``; if the sender is gone, the result is applied as it is (``ResultDue``):
  nobody may be left who could send those calls. Within one incarnation only: a new master's
  epoch makes the object again, fresh, and calls on the old incarnation never reach it
  (docs/plugins.md: a plugin's answer travels as return values; shared objects only prune).
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

from satind.core.effects import Effects, Send, Timer, ToCompute
from satind.core.model.sharing import Held
from satind.core.model.timers import AskCalls, DigestRound, FetchReplicas, FlushShared
from satind.net import messages as m
from satind.work.events import (
    DigestArrived,
    DigestWanted,
    ForgetRun,
    JobArrived,
    ReplicaArrived,
    ReplicaWanted,
    ResultDue,
    UpdatesArrived,
)
from satind.work.jobs import Job

if TYPE_CHECKING:
    from satind.core.state import PeerState


# -- global calls out and in ----------------------------------------------------------------


def call_made(state: PeerState, update: m.SharedUpdate) -> Effects:
    """Hook ``shared_update``: queue this peer's global call; flush when due."""
    sh = state.sharing
    first = not sh.outbox
    sh.outbox.append(update)
    sh.outbox_bytes += len(update.args) + len(update.shared_id) + len(update.method) + 16
    if sh.outbox_bytes >= state.cfg.shared.combine_bytes:
        return flush(state)
    if first:
        return [Timer(state.cfg.shared.combine_s, FlushShared()), *_digests(state)]
    return []


def flush(state: PeerState) -> Effects:
    """Send the queued global calls to every other member, one message each."""
    sh = state.sharing
    if not sh.outbox:
        return []
    updates, size = sh.outbox, sh.outbox_bytes
    sh.outbox, sh.outbox_bytes = [], 0
    others = state.others()
    sh.counters.shared_updates_sent += len(updates) * len(others)
    sh.counters.shared_update_messages += len(others)
    sh.counters.shared_update_bytes += size * len(others)
    msg = m.SharedUpdates(updates)
    return [Send(peer, msg) for peer in others]


def on_updates(state: PeerState, msg: m.SharedUpdates) -> Effects:
    state.sharing.counters.shared_updates_received += len(msg.updates)
    return [ToCompute(UpdatesArrived(list(msg.updates))), *_digests(state)]


# -- anti-entropy ---------------------------------------------------------------------------


def _digests(state: PeerState) -> Effects:
    """Start the anti-entropy timer unless it runs: every ``digest_s``, while this peer holds
    replicas, one other member (in turn, from an offset of this peer's own so that peers do
    not all pick the same one) gets our digest."""
    sh = state.sharing
    every = state.cfg.shared.digest_s
    if sh.digesting or every <= 0:
        return []
    sh.digesting = True
    sh.digest_turn = zlib.crc32(state.name.encode())
    return [Timer(every, DigestRound())]


def digest_round(state: PeerState) -> Effects:
    """Timer ``DigestRound``: our digest to the next member, while we hold replicas."""
    sh = state.sharing
    every = state.cfg.shared.digest_s
    if not state.sharing.replica_ids:
        sh.digesting = False  # started again by the next call, update or replica
        return []
    others = sorted(state.others())
    if not others:
        return [Timer(every, DigestRound())]
    sh.digest_turn += 1
    sh.counters.shared_digests += 1
    target = others[sh.digest_turn % len(others)]
    return [ToCompute(DigestWanted(target)), Timer(every, DigestRound())]


def on_digest(state: PeerState, peer: str, msg: m.SharedDigest) -> Effects:
    """Another peer's digest: our compute side answers it (engine/replication.py)."""
    return [ToCompute(DigestArrived(peer, list(msg.digests), msg.reply))]


def replica_kept(state: PeerState, shared_id: str, kept: bool) -> Effects:
    """Report ``ReplicaKept``: a replica this peer holds now (a job here made the object), or
    a fetched one that could not be installed (its jobs fetch it again)."""
    if kept:
        state.sharing.replica_ids.add(shared_id)
    else:
        state.sharing.replica_ids.discard(shared_id)
    return []


def shared_send(
    state: PeerState, peer: str, msg: m.ReplicaReply | m.SharedDigest | m.SharedUpdates
) -> Effects:
    """Hook ``shared_send``: what the compute side made for ``peer`` goes."""
    if isinstance(msg, m.SharedUpdates):
        state.sharing.counters.shared_updates_resent += len(msg.updates)
    return [Send(peer, msg)]


# -- replicas follow the work ----------------------------------------------------------------


def arrive(state: PeerState, job: Job, shared: list[str], victim: str, now: float) -> Effects:
    """A stolen job came: to the compute side now, or held until the replicas it needs are
    here."""
    if shared:
        state.sharing.refs[job] = list(shared)
    missing = {sid for sid in shared if sid not in state.sharing.replica_ids}
    if not missing:
        return [ToCompute(JobArrived(job))]
    state.sharing.held.append(Held(job, victim, missing, now))
    return _ask(state, victim, missing)


def on_replica_request(state: PeerState, thief: str, msg: m.ReplicaRequest) -> Effects:
    """A thief asks for a replica: the compute side encodes it at a safe point."""
    return [ToCompute(ReplicaWanted(msg.shared_id, thief))]


def on_replica_reply(state: PeerState, msg: m.ReplicaReply) -> Effects:
    """A replica came: to the compute side, and with it the held jobs it completes."""
    if msg.state is None:
        return []  # the peer had none any more: asked again later (tick)
    arrived = ReplicaArrived(msg.shared_id, msg.cls, msg.state, dict(msg.seen), msg.incarnation)
    state.sharing.replica_ids.add(msg.shared_id)
    fx: Effects = [ToCompute(arrived), *_digests(state)]
    still: list[Held] = []
    for held in state.sharing.held:
        held.missing.discard(msg.shared_id)
        if held.missing:
            still.append(held)
        elif not held.job.run.aborted:
            fx.append(ToCompute(JobArrived(held.job)))
    state.sharing.held = still
    return fx


def guard_waiting(state: PeerState, job: Job, waiting: bool = True) -> Effects:
    """Hook ``guard_waiting``: while the job stays parked, fetch its replicas from its victim
    every ``guard_wait_s``, doubling up to ``fetch_retry_s`` (a fetch or its answer may be
    lost too); the compute side runs it as soon as its guard holds."""
    sh = state.sharing
    if not waiting:
        sh.parked.discard(job)
        return []
    sh.parked.add(job)
    sh.counters.guard_waits += 1
    wait = state.cfg.shared.guard_wait_s
    return [Timer(wait, FetchReplicas(job, wait))]


def fetch_replicas(state: PeerState, job: Job, wait: float) -> Effects:
    """Timer ``FetchReplicas``: the parked job still waits: fetch its replicas from its
    victim, and wait again, twice as long."""
    sh = state.sharing
    cfg = state.cfg.shared
    if job not in sh.parked:
        return []
    if job.origin is None or job.run.aborted or state.is_gone(job.origin):
        sh.parked.discard(job)
        return []
    again = min(2 * wait, max(cfg.fetch_retry_s, cfg.guard_wait_s))
    return [
        *_ask(state, job.origin, set(sh.refs.get(job, []))),
        Timer(again, FetchReplicas(job, again)),
    ]


def result_waiting(state: PeerState, job: Job, sender: str, waiting: bool = True) -> Effects:
    """Hook ``result_waiting``: while the result of ``job`` waits for the global calls its
    thief had applied, ask ``sender`` for what we lack every ``guard_wait_s``, doubling up to
    ``fetch_retry_s``; once ``sender`` is gone, apply it as it is (see the module's
    docstring)."""
    sh = state.sharing
    if not waiting:
        sh.waiting.discard(job)
        return []
    sh.waiting.add(job)
    sh.counters.results_waited += 1
    wait = state.cfg.shared.guard_wait_s
    return [Timer(wait, AskCalls(job, sender, wait))]


def ask_calls(state: PeerState, job: Job, sender: str, wait: float) -> Effects:
    """Timer ``AskCalls``: the result still waits: ask its sender for what we lack (our
    digest), and wait again, twice as long; once the sender is gone, apply it as it is."""
    sh = state.sharing
    cfg = state.cfg.shared
    if job not in sh.waiting:
        return []
    if job.run.aborted:
        sh.waiting.discard(job)
        return []  # the compute side drops it with its run
    if not sender or state.is_gone(sender):
        sh.waiting.discard(job)
        return [ToCompute(ResultDue(job))]
    again = min(2 * wait, max(cfg.fetch_retry_s, cfg.guard_wait_s))
    return [ToCompute(DigestWanted(sender)), Timer(again, AskCalls(job, sender, again))]


def tick(state: PeerState, now: float) -> Effects:
    """Ask again for replicas not received; drop held jobs whose victim is gone or whose run
    ended (nobody waits for them)."""
    fx: Effects = []
    keep: list[Held] = []
    for held in state.sharing.held:
        if held.job.run.aborted or state.is_gone(held.victim):
            continue
        if now - held.asked >= state.cfg.shared.fetch_retry_s:
            held.asked = now
            fx += _ask(state, held.victim, held.missing)
        keep.append(held)
    state.sharing.held = keep
    return fx


def forget_run(state: PeerState, run_id: str) -> Effects:
    """A run is over here: its records go, and the compute side drops its replicas (they
    are its own: popping them here raced its digests, "dictionary changed size during
    iteration")."""
    sh = state.sharing
    sh.held = [h for h in sh.held if h.job.run.run_id != run_id]
    sh.parked = {j for j in sh.parked if j.run.run_id != run_id}
    sh.refs = {j: r for j, r in sh.refs.items() if j.run.run_id != run_id}
    sh.waiting = {j for j in sh.waiting if j.run.run_id != run_id}
    prefix = f"{run_id}:"
    sh.replica_ids = {sid for sid in sh.replica_ids if not sid.startswith(prefix)}
    return [ToCompute(ForgetRun(run_id))]


def _ask(state: PeerState, victim: str, ids: set[str]) -> Effects:
    state.sharing.counters.replica_fetches += len(ids)
    return [Send(victim, m.ReplicaRequest(sid)) for sid in sorted(ids)]
