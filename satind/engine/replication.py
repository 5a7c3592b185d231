"""Anti-entropy for shared objects, on the compute side: the recent global calls a peer keeps,
and its answer to another peer's digest (core/sharing.py sends the digests).

Global calls are pushed once, best effort (satin-grid-programming-model §4.2): a lost one leaves
a replica behind, and the calls of its sender that come after it wait for it. Guards keep jobs
correct meanwhile, but a replica no job of the run needs would stay behind for ever. So every
``shared.digest_s`` a peer tells one other member what it has applied (per replica: its
incarnation and how many calls of each sender; the paper leaves this open, memberlist's
push-pull is the model); the member answers with the calls the digester lacks from its log of
recent calls, or, when its log no longer reaches back that far, with its whole replica (only if
its replica has seen everything the digester's has, so an install loses nothing); and when the
digester is ahead of it, it sends its own digest back once, so the exchange is push-pull.
Replicas converge once calls stop, under any loss that leaves some messages through.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from satind.config import SharedConfig
from satind.engine.replicas import Replica
from satind.net.records import ReplicaDigest, SharedUpdate

# Bytes an update costs in the log beyond its arguments (ids, method name, numbers).
_OVERHEAD = 64


@dataclass
class UpdateLog:
    """The global calls applied here (this peer's and others'), per shared object, the oldest
    dropped once a replica's calls pass ``max_bytes``."""

    max_bytes: int = SharedConfig.log_bytes
    calls: dict[str, dict[tuple[str, int], SharedUpdate]] = field(default_factory=dict)
    size: dict[str, int] = field(default_factory=dict)

    def add(self, update: SharedUpdate) -> None:
        calls = self.calls.setdefault(update.shared_id, {})
        key = (update.sender, update.seq)
        if key in calls:
            return
        calls[key] = update
        size = self.size.get(update.shared_id, 0) + len(update.args) + _OVERHEAD
        while size > self.max_bytes and len(calls) > 1:
            old = calls.pop(next(iter(calls)))  # dicts keep insertion order: the oldest
            size -= len(old.args) + _OVERHEAD
        self.size[update.shared_id] = size

    def keep(self, shared: dict[str, Replica]) -> None:
        """Forget the calls on replicas that are gone (their run is over here)."""
        for shared_id in [sid for sid in self.calls if sid not in shared]:
            self.drop(shared_id)

    def drop(self, shared_id: str) -> None:
        """The replica's state was replaced (another incarnation) or forgotten."""
        self.calls.pop(shared_id, None)
        self.size.pop(shared_id, None)


def digest(shared: dict[str, Replica]) -> list[ReplicaDigest]:
    """What this peer has applied, per replica."""
    return [
        ReplicaDigest(sid, obj._shared_inc, dict(obj._shared_seen)) for sid, obj in shared.items()
    ]


@dataclass
class Answer:
    """What to send the peer whose digest this answers."""

    updates: list[SharedUpdate] = field(default_factory=list)
    # Replicas to push whole (the log does not reach back far enough, or it is another
    # incarnation).
    replicas: list[str] = field(default_factory=list)
    # Whether that peer has something this one lacks (it gets our digest back).
    behind: bool = False


def answer(
    shared: dict[str, Replica],
    log: UpdateLog,
    theirs: list[ReplicaDigest],
    peer: str,
    budget: int,
) -> Answer:
    """Compare ``peer``'s digest with our replicas. ``budget``: bytes of calls to send at most
    (the rest goes at the next exchange)."""
    out = Answer()
    for d in theirs:
        if budget <= 0:
            break  # the rest at the next exchange (and a digest of many entries costs little)
        obj = shared.get(d.shared_id)
        if obj is None:
            continue  # no replica here: nothing to give, nothing wanted
        if obj._shared_inc != d.incarnation:
            if obj._shared_inc > d.incarnation:
                out.replicas.append(d.shared_id)
            else:
                out.behind = True
            continue
        mine = obj._shared_seen
        if any(n > mine.get(p, 0) for p, n in d.seen.items()):
            out.behind = True
        missing: list[SharedUpdate] = []
        complete = True
        for sender, n in mine.items():
            if sender == peer:
                continue  # its own calls: it has them all
            for seq in range(d.seen.get(sender, 0) + 1, n + 1):
                update = log.calls.get(d.shared_id, {}).get((sender, seq))
                if update is None:
                    complete = False
                    break
                missing.append(update)
        dominates = all(mine.get(p, 0) >= n for p, n in d.seen.items())
        if not complete and dominates:
            out.replicas.append(d.shared_id)
            continue
        for update in missing:
            if budget <= 0:
                break
            out.updates.append(update)
            budget -= len(update.args) + _OVERHEAD
    return out
