"""The victim's side of a steal (satin-grid-programming-model §4.1.2).

A steal request takes the oldest job of this peer's queue — the one highest in the tree, so
the most work per message — or, when the thief waits in a sync of one run, the oldest job of
that run. A job whose result some peer keeps (an orphan tuple came in while it waited) is not
given away but fetched (core/orphans.py). The job's arguments are encoded only now
(serialization on demand); large ones off the network side. The reply goes on the request's
connection; once it is out, the job is in custody (custody.py) until its result is back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from satind.core import kinds
from satind.core.aborts import cancelled_here
from satind.core.effects import (
    DEBUG,
    WARNING,
    Checkpoint,
    Effects,
    EncodeArgs,
    HandOut,
    Link,
    Reply,
    ToCompute,
)
from satind.core.model.orphans import Orphans
from satind.core.orphans import fetch_orphan
from satind.net import codec
from satind.net import messages as m
from satind.net.codec import Encoded
from satind.work.events import Wakeup
from satind.work.jobs import Job, is_aborted
from satind.work.spawnables import name_of

if TYPE_CHECKING:
    from satind.core.state import PeerState


# Arguments at most this large (in items and characters, estimated without encoding) are
# encoded on the network side at once; larger ones in a worker thread (a big argument takes
# seconds, during which the network side could not answer a probe).
SMALL_ARGS = 2_000
# Jobs of runs a thief does not run (``StealRequest.skip``) a victim looks past for one it
# may have: the oldest of another run is rarely far behind.
SKIP_LOOK = 16


def on_steal_request(state: PeerState, link: Link, msg: m.StealRequest, now: float) -> Effects:
    """A thief asks for work: hand out a job, or say there is none."""
    fx: Effects = []
    queue = state.queue
    # Never a job its master placed here (an iterative task, an SPMD entity job or root):
    # it runs here, not elsewhere (``WorkQueue.steal`` passes over them).
    job = queue.steal(msg.run)
    while job is not None and _over(state, job):
        # A job of a run that is over here (ended, suspended, or an epoch left behind), or
        # of an aborted frame or job (core/aborts.py): nobody waits for it. Given away, it
        # would be run again under the run's id.
        job = queue.steal(msg.run)
    if job is not None and job.run.run_id in msg.skip:
        # The thief does not run that run (refused there, or its shipped code is coming):
        # look past its jobs, a few at most, and put them back as they were (oldest first).
        passed = [job]
        job = queue.steal(msg.run)
        while job is not None and job.run.run_id in msg.skip and len(passed) < SKIP_LOOK:
            passed.append(job)
            job = queue.steal(msg.run)
        if job is not None and job.run.run_id in msg.skip:
            passed.append(job)
            job = None
        for skipped in reversed(passed):
            queue.give_back(skipped)
    if job is not None and job.parent is not None and job.run.orphans is not None:
        holder = job.run.orphans.get(job.path)
        if holder is not None:
            fx += fetch_orphan(state, job, holder, now)  # kept elsewhere: fetch, do not give
            job = None
    if job is None:
        # Nothing to give, but an SPMD entity of ours may run better at the thief (IOS).
        for kind in kinds.each():
            if kind.idle_thief is not None:
                fx += kind.idle_thief(state, link.remote_name, msg.cpu, now)
        table, rest = _table(state, link, msg)
        return [*fx, Reply(link, m.StealReply(msg.req, None, table)), *rest]
    if isinstance(job.args, Encoded):
        # Stolen on, as it came (with the shared objects it came with).
        shared = state.sharing.refs.get(job, [])
        return fx + hand_out(state, link, msg, job, job.args.data, now, shared)
    if _small(job.args, SMALL_ARGS):
        refs: list[Any] = []
        try:
            data = codec.encode_value(job.args, state.cfg.net.max_frame_bytes, refs)
        except codec.EncodeError as exc:
            return fx + hand_out(state, link, msg, job, exc, now)
        more = _siblings(state, job, msg, len(data)) if msg.many > 1 else []
        return fx + hand_out(state, link, msg, job, data, now, shared_ids(refs), more)
    return [*fx, EncodeArgs(link, msg, job)]


def _siblings(
    state: PeerState, first: Job, msg: m.StealRequest, size: int
) -> list[tuple[Job, bytes, list[str]]]:
    """Steal-half: the siblings of ``first`` (jobs its parent spawned) that lie next at the
    oldest end of the queue, the older half of them if there are ``steal.batch_from`` or
    more, at most ``msg.many`` jobs in all with ``first``; each with its encoded arguments
    and shared object ids, and taken off the queue. Chosen from a snapshot of the queue and
    removed one by one, so that no job the compute side may need is ever out of the queue
    meanwhile (it would find the queue empty and wait): one it took since ends the batch,
    as do large arguments or a reply grown too large. Nothing in a run with orphan tuples
    (its jobs may be fetched instead, ``fetch_orphan``)."""
    parent = first.parent
    if parent is None or first.run.orphans is not None:
        return []
    jobs = state.queue.jobs
    siblings: list[Job] = []
    for job in list(jobs)[: 2 * msg.many - 1]:  # a snapshot: one C call, atomic
        if job.parent is not parent or _over(state, job):
            break
        siblings.append(job)
    if 1 + len(siblings) < state.cfg.steal.batch_from:
        return []
    budget = state.cfg.net.max_frame_bytes // 4 - size
    given: list[tuple[Job, bytes, list[str]]] = []
    # The older half of the siblings, ``first`` included, go to the thief.
    for job in siblings[: min((len(siblings) + 1) // 2, msg.many - 1)]:
        if not _small(job.args, SMALL_ARGS):
            break
        refs: list[Any] = []
        try:
            data = codec.encode_value(job.args, state.cfg.net.max_frame_bytes, refs)
        except codec.EncodeError:
            break
        budget -= len(data)
        if budget < 0:
            break
        try:
            jobs.remove(job)  # atomic beside the compute side's pops
        except ValueError:
            break  # the compute side took it meanwhile
        given.append((job, data, shared_ids(refs)))
    return given


def hand_out(
    state: PeerState,
    link: Link,
    msg: m.StealRequest,
    job: Job,
    args: bytes | codec.EncodeError,
    now: float,
    shared: list[str] | None = None,
    more: list[tuple[Job, bytes, list[str]]] | None = None,
) -> Effects:
    """Give ``job`` (its arguments encoded, or why they could not be) to the thief, with the
    ids of the shared objects they refer to (``shared_ids`` of what encoding them recorded),
    and ``more`` of its siblings the same way (``_siblings``)."""
    table, rest = _table(state, link, msg)
    run = state.runs.active.get(job.run.run_id)
    if run is None or _over(state, job):
        # Its run ended, or it was aborted, meanwhile (large arguments are encoded off the
        # network side): nobody waits for it. Siblings taken with it that still count go
        # back.
        back = _put_back(state, [each for each, _, _ in more or []])
        return [*back, Reply(link, m.StealReply(msg.req, None, table)), *rest]
    if isinstance(args, codec.EncodeError):
        # Arguments CBOR cannot carry: this job runs here, and stays the oldest.
        state.note(WARNING, __name__, "cannot give away %r: %s", job, args)
        return [*_give_back(state, job), Reply(link, m.StealReply(msg.req, None, table)), *rest]
    thief = link.remote_name
    given = [(job, args, shared or []), *(more or [])]
    specs = []
    for each, data, ids in given:
        spec = job_spec(run.info, each, data, ids)
        state.custody.give((spec.run_id, spec.path), each, thief, now)
        state.count_steal(spec.run_id, "jobs_given")
        specs.append(spec)
    state.note(
        DEBUG,
        __name__,
        "gave %s%s to %s (%d job(s))",
        run.info.run_id,
        specs[0].path.hex(),
        thief,
        len(specs),
    )
    reply = m.StealReply(msg.req, specs[0], table, specs[1:])
    extra = [each for each, _, _ in given[1:]]
    return [HandOut(link, reply, job, extra), *rest, Checkpoint("theft")]


def job_spec(
    info: m.RunInfo, job: Job, args: bytes, shared: list[str], pushed: bool = False
) -> m.JobSpec:
    """``job`` for the wire: stolen (``hand_out``) or pushed to a worker (core/iterative.py)."""
    return m.JobSpec(
        run_id=info.run_id,
        plugin=info.plugin,
        code_hash=info.code_hash,
        master=info.master,
        branching=info.branching,
        path=job.path,
        fn=name_of(job.fn),
        shipped=info.shipped,
        args=args,
        epoch=info.epoch,
        shared=shared,
        pushed=pushed,
    )


def shared_ids(refs: list[Any]) -> list[str]:
    """The ids of the shared objects an encoding recorded (``encode_value(..., refs)``)."""
    return sorted({str(ref[0]) for ref in refs})


def not_handed_out(
    state: PeerState, reply: m.StealReply, job: Job, more: Sequence[Job] = ()
) -> Effects:
    """The reply carrying ``job`` (and ``more``) could not be sent (the connection closed):
    they stay here, as they were in the queue."""
    specs = [reply.job, *reply.more] if reply.job is not None else []
    for spec in specs:
        state.custody.given.pop((spec.run_id, spec.path), None)
        state.count_steal(spec.run_id, "jobs_given", -1)
    return [*_put_back(state, more), *_give_back(state, job)]


def _over(state: PeerState, job: Job) -> bool:
    """Nobody waits for ``job`` any more: its run is over here (ended, suspended, or an epoch
    left behind), or it, or a job above it, was aborted (core/aborts.py). Given away, it
    would be run again under the run's id."""
    return job.run.aborted or is_aborted(job) or cancelled_here(state, job)


def _put_back(state: PeerState, jobs: Sequence[Job]) -> Effects:
    """Siblings taken for a thief that did not get them go back to the oldest end, in their
    order, but for those an abort has cancelled meanwhile (``abort()`` could not drop them
    while they were out of the queue, and nobody waits for them now)."""
    back = [job for job in jobs if not job.run.aborted and not is_aborted(job)]
    for job in reversed(back):
        state.queue.give_back(job)
    return [ToCompute(Wakeup())] if back else []


def _give_back(state: PeerState, job: Job) -> Effects:
    """A job taken from the queue goes back to its oldest end; the compute side may have
    found the queue empty meanwhile and gone to wait: wake it."""
    state.queue.give_back(job)
    return [ToCompute(Wakeup())]


def _table(
    state: PeerState, link: Link, msg: m.StealRequest
) -> tuple[list[m.OrphanTuple] | None, Effects]:
    """A joiner's steal asks for the orphan table (§3.5): the whole of it. The reply carries
    one message's worth (``ft.tuples_per_message``); the rest follows on the same link as
    gossip messages of that size, which the joiner files as any tuples."""
    if not msg.orphans:
        return None, []
    tuples = [
        t for r in state.runs.active.values() for t in Orphans.tuples_of(r.state, r.info.run_id)
    ]
    size = max(1, state.cfg.ft.tuples_per_message)
    rest: Effects = [
        Reply(link, m.Gossip(m.Broadcasts(tuples=tuples[at : at + size])))
        for at in range(size, len(tuples), size)
    ]
    return tuples[:size], rest


def _small(value: Any, budget: int) -> bool:
    """Whether a value is small enough to encode at once: a walk that stops as soon as it
    has seen ``budget`` items or characters, so a big value costs no more than a small one
    to classify."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str | bytes | bytearray):
            budget -= 1 + len(item) // 64
        elif isinstance(item, list | tuple | set | frozenset):
            budget -= 1 + len(item)
            if budget > 0:
                stack.extend(item)
        elif isinstance(item, dict):
            budget -= 1 + 2 * len(item)
            if budget > 0:
                stack.extend(item.keys())
                stack.extend(item.values())
        else:
            budget -= 1
        if budget <= 0:
            return False
    return True
