"""Shared-object bookkeeping on the network side (the rules: core/sharing.py): global calls
waiting to be combined, stolen jobs waiting for replicas, and the counters."""

from __future__ import annotations

from dataclasses import dataclass, field

from satind.net import messages as m
from satind.work.jobs import Job


@dataclass
class SharingCounters:
    """Names are those of the run JSON ``stats`` (stats.py)."""

    shared_updates_sent: int = 0
    shared_updates_received: int = 0
    shared_update_messages: int = 0
    shared_update_bytes: int = 0
    guard_waits: int = 0
    # Results of stolen jobs held until the global calls their subtree made were applied.
    results_waited: int = 0
    replica_fetches: int = 0
    # Anti-entropy: digests sent, and calls sent again in answer to one.
    shared_digests: int = 0
    shared_updates_resent: int = 0

    def as_dict(self) -> dict[str, float]:
        return dict(vars(self))


@dataclass
class Held:
    """A stolen job waiting for replicas before it goes to the compute side."""

    job: Job
    victim: str
    missing: set[str]
    asked: float


@dataclass
class Sharing:
    """A peer's shared-object bookkeeping on the network side."""

    counters: SharingCounters = field(default_factory=SharingCounters)
    # Global calls made here, waiting for the combining interval to end.
    outbox: list[m.SharedUpdate] = field(default_factory=list)
    outbox_bytes: int = 0
    held: list[Held] = field(default_factory=list)
    # Stolen jobs the compute side parked because their guard is false.
    parked: set[Job] = field(default_factory=set)
    # The shared objects each stolen job refers to (for a fetch when its guard waits).
    refs: dict[Job, list[str]] = field(default_factory=dict)
    # Children whose result the compute side holds until the calls it needs are here.
    waiting: set[Job] = field(default_factory=set)
    # The replicas this peer holds, by id: made by a job here (``ReplicaKept``), or fetched
    # (from the moment their ``ReplicaArrived`` goes to the compute side). The core's own
    # set: the compute side's table is never read from this thread (satind/engine/README.md).
    replica_ids: set[str] = field(default_factory=set)
    # Whether the anti-entropy timer runs, and whose turn it is next.
    digesting: bool = False
    digest_turn: int = 0
