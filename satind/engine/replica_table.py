"""This peer's replicas of shared objects, on the compute thread (satin-grid-programming-model
§4.2): ``ReplicaTable`` numbers and ships this peer's global calls, applies other peers' in
each sender's order, installs and gives fetched replicas, and answers anti-entropy digests
(engine/replication.py). It lives beside the worker, not inside it: the worker's hot path
(spawn, sync) never touches it, and the worker only hands it the mailbox events about shared
objects at its safe points.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from satind.engine.frames import DigestArrived, ReplicaArrived, ReplicaWanted
from satind.engine.replicas import Replica, apply_global, class_name, rebuild
from satind.engine.replication import UpdateLog, answer, digest
from satind.net.codec import EncodeError, decode_value, encode_value
from satind.net.messages import ReplicaReply, SharedDigest, SharedUpdates
from satind.net.records import ReplicaDigest, SharedUpdate
from satind.work.jobs import Job
from satind.work.reports import ReplicaKept, Report, SharedCallMade, SharedSend

log = logging.getLogger(__name__)


class ReplicaHooks(Protocol):
    """Where the replica table reports (the compute side's ``WorkerHooks``)."""

    def report(self, event: Report) -> None: ...


class ReplicaTable:
    """This peer's replicas of a run's shared objects, on the compute thread, and what keeps
    them in step with the other peers' (satin-grid-programming-model §4.2): numbering and
    shipping this peer's global calls, applying other peers' in each sender's order,
    installing and giving fetched replicas, and anti-entropy digests (engine/replication.py).

    The worker owns it and asks it at its safe points (mailbox events); a method that changed
    a replica returns True, so that the worker re-checks the jobs waiting for one (parked
    stolen jobs whose guard was false, results held for global calls).
    """

    def __init__(self, hooks: ReplicaHooks, max_frame: int, value_depth: int) -> None:
        self.hooks = hooks
        self.max_frame = max_frame
        self.value_depth = value_depth
        # Numbers this peer's own calls (set by the node once the peer is named).
        self.peer_name = ""
        # Replicas by id; global calls of other peers that arrived ahead of an earlier one of
        # the same sender; recent calls applied here, to answer other peers' digests.
        self.objects: dict[str, Replica] = {}
        self.pending: dict[tuple[str, str], dict[int, SharedUpdate]] = {}
        self.log = UpdateLog()

    def share(self, obj: Replica, run_id: str, path: bytes, count: int, epoch: int) -> None:
        """A shared object made by the running job (``count`` made before it by that job):
        its reproducible id, and our replica."""
        shared_id = f"{run_id}:{path.hex()}:{count}"
        obj._shared_id = shared_id
        obj._shared_inc = epoch
        self.objects[shared_id] = obj
        self.hooks.report(ReplicaKept(shared_id))

    def call_made(self, obj: Replica, method: str, args: tuple[Any, ...]) -> None:
        """A global call just applied here: number it and ship it.

        Raises:
            EncodeError: its arguments cannot travel.
        """
        assert obj._shared_id is not None
        data = encode_value(args, self.max_frame)
        seq = obj._shared_seen.get(self.peer_name, 0) + 1
        obj._shared_seen[self.peer_name] = seq
        update = SharedUpdate(obj._shared_id, self.peer_name, seq, method, data, obj._shared_inc)
        self.log.add(update)
        self.hooks.report(SharedCallMade(update))

    def apply_updates(self, updates: list[SharedUpdate]) -> None:
        for update in updates:
            obj = self.objects.get(update.shared_id)
            if obj is None or update.sender == self.peer_name:
                continue  # no replica here (fetched with its state when needed), or ours
            if update.incarnation != obj._shared_inc:
                continue  # a call on another incarnation (an epoch's): a fetch settles it
            key = (update.shared_id, update.sender)
            self.pending.setdefault(key, {})[update.seq] = update
            self._apply_pending(obj, key)

    def forget_run(self, run_id: str) -> None:
        """A run ended here: its replicas, calls held for them and logged calls go."""
        prefix = f"{run_id}:"
        for shared_id in [sid for sid in self.objects if sid.startswith(prefix)]:
            del self.objects[shared_id]
        for key in [k for k in self.pending if k[0].startswith(prefix)]:
            del self.pending[key]
        self.log.keep(self.objects)

    def _apply_pending(self, obj: Replica, key: tuple[str, str]) -> None:
        """Apply the calls of one sender held for ``obj`` that come next, in order; drop
        those it has seen."""
        pending = self.pending[key]
        seen = obj._shared_seen
        sender = key[1]
        while (nxt := pending.pop(seen.get(sender, 0) + 1, None)) is not None:
            try:
                args = decode_value(nxt.args, self.value_depth)
                apply_global(obj, nxt.method, tuple(args))
            except Exception as exc:  # a bad update costs that update only
                _log_bad_update(key[0], nxt.method, exc)
            seen[sender] = nxt.seq
            self.log.add(nxt)
        for old in [s for s in pending if s <= seen.get(sender, 0)]:
            del pending[old]  # duplicates
        if not pending:
            del self.pending[key]

    def install(self, event: ReplicaArrived, parked: list[Job]) -> None:
        """A replica fetched from another peer: ours from now on, unless ours is ahead.
        Another incarnation than ours is installed as a new object, and the ``parked`` jobs
        (stolen jobs waiting for a replica to satisfy their guard) are given it.

        Of our incarnation, it is installed in place: jobs here hold references to this very
        object, and a call the fetched state has is one they may be waiting for. Of a newer
        one (a new master's epoch made the object again, from its start), never in place:
        frames of the old epoch may still be running here, their guard checked against the
        old state once, at their start; changed under them, their leaves would read another
        step's state and compute, without an error, results that the new epoch then reuses
        as orphans (a Barnes-Hut run's final positions came out wrong so, once, after its
        master was killed). They go on with the old object, which no call changes any more;
        what they compute is what their guard promised."""
        mine = self.objects.get(event.shared_id)
        if mine is not None and not _supersedes(event, mine):
            return
        try:
            state = decode_value(event.state, self.value_depth)
            if mine is None or mine._shared_inc != event.incarnation:
                self.objects[event.shared_id] = rebuild(
                    event.cls, event.shared_id, state, event.seen, event.incarnation
                )
                if mine is None:
                    return
                self.log.drop(event.shared_id)  # calls on the old incarnation
                for key in [k for k in self.pending if k[0] == event.shared_id]:
                    del self.pending[key]  # calls held for it
                for job in parked:  # they wait for the new object to change, not the old
                    job.args = self.current(job.args)
                return
            mine.restore_shared(state)
            mine._shared_seen = dict(event.seen)
            for key in [k for k in self.pending if k[0] == event.shared_id]:
                self._apply_pending(mine, key)  # calls the replica does not have
        except Exception as exc:
            _log_bad_update(event.shared_id, "<replica>", exc)
            if event.shared_id not in self.objects:
                self.hooks.report(ReplicaKept(event.shared_id, kept=False))

    def current(self, value: Any, depth: int = 0) -> Any:
        """``value`` (a parked job's arguments) with each shared object in it that another
        incarnation has replaced here (``install``) swapped for the table's object of its id:
        a job that waits for a replica must wait for the one that changes. Lists, tuples and
        dicts are looked through, as deep as arguments decode (``value_depth``)."""
        shared_id = getattr(value, "_shared_id", None)
        if isinstance(shared_id, str):
            return self.objects.get(shared_id, value)
        if depth >= self.value_depth:
            return value
        if type(value) is tuple or type(value) is list:
            items = [self.current(v, depth + 1) for v in value]
            if all(a is b for a, b in zip(items, value, strict=True)):
                return value
            return tuple(items) if type(value) is tuple else items
        if type(value) is dict:
            fresh = {k: self.current(v, depth + 1) for k, v in value.items()}
            return value if all(fresh[k] is v for k, v in value.items()) else fresh
        return value

    def give(self, event: ReplicaWanted) -> None:
        """A thief asks for our replica: encode it at this safe point."""
        obj = self.objects.get(event.shared_id)
        state = None
        cls = ""
        seen: dict[str, int] = {}
        inc = 0
        if obj is not None:
            try:
                state = encode_value(obj.shared_state(), self.max_frame)
            except EncodeError as exc:
                _log_bad_update(event.shared_id, "<replica>", exc)
            cls, seen, inc = class_name(type(obj)), dict(obj._shared_seen), obj._shared_inc
        reply = ReplicaReply(event.shared_id, cls, state, seen, inc)
        self.hooks.report(SharedSend(event.thief, reply))

    def send_digest(self, peer: str) -> None:
        """Anti-entropy's turn: tell ``peer`` what our replicas have applied."""
        self.log.keep(self.objects)
        self.hooks.report(SharedSend(peer, SharedDigest(digest(self.objects))))

    def answer_digest(self, event: DigestArrived) -> None:
        """Anti-entropy (engine/replication.py): send ``event.peer`` the calls and replicas it
        lacks, and our digest if it is ahead of us."""
        out = answer(self.objects, self.log, event.digests, event.peer, self.max_frame // 4)
        if out.updates:
            self.hooks.report(SharedSend(event.peer, SharedUpdates(out.updates)))
        for shared_id in out.replicas:
            self.give(ReplicaWanted(shared_id, event.peer))
        if out.behind and not event.reply:
            self.hooks.report(
                SharedSend(event.peer, SharedDigest(digest(self.objects), reply=True))
            )

    def needs(self, run_id: str) -> list[ReplicaDigest]:
        """What this peer has applied to the run's shared objects (a finished stolen job's
        ``needs``): its own calls, and every call of its subtree, whose results waited here
        for them."""
        prefix = f"{run_id}:"
        return [
            ReplicaDigest(sid, obj._shared_inc, dict(obj._shared_seen))
            for sid, obj in self.objects.items()
            if obj._shared_seen and sid.startswith(prefix)
        ]

    def seen(self, needs: list[ReplicaDigest]) -> bool:
        """Whether our replicas have applied every call ``needs`` lists. A replica we do not
        have (no frame here can read it) or of another incarnation (a new master's epoch
        made the object again: the old one's calls are never applied to it) waits for
        nothing."""
        for need in needs:
            obj = self.objects.get(need.shared_id)
            if obj is None or obj._shared_inc != need.incarnation:
                continue
            seen = obj._shared_seen
            for sender, count in need.seen.items():
                # Our own calls are applied when they are made.
                if count > seen.get(sender, 0) and sender != self.peer_name:
                    return False
        return True


def _supersedes(event: ReplicaArrived, mine: Replica) -> bool:
    """Whether a fetched replica may replace ours: it is of a newer incarnation, or of ours and
    has seen every call ours has, and more. Never one that lacks a call ours has seen: the
    install would undo it — this peer's own calls among them, whose numbers it would then give
    out again (and receivers drop a number they have seen). What ours lacks then comes by
    updates and digests instead."""
    if event.incarnation != mine._shared_inc:
        return event.incarnation > mine._shared_inc
    theirs, ours = event.seen, mine._shared_seen
    return all(theirs.get(p, 0) >= n for p, n in ours.items()) and any(
        n > ours.get(p, 0) for p, n in theirs.items()
    )


def _log_bad_update(shared_id: str, method: str, exc: Exception) -> None:
    log.warning(
        "shared object %s: cannot apply %s: %s: %s", shared_id, method, type(exc).__name__, exc
    )
