"""Reusing a lost member's checkpoint log after a partial crash (satin-grid-programming-model
§4.4, §5.5; kaapi §3).

The checkpoint logs (recovery/checkpoint.py) are not only for a resume after a total loss. When
a member is lost, the jobs it took are restarted here (core/restart.py) — and what it logged
(its results for others; with policy "tic" or "sel", what its own frames had finished) would be
computed again. So when this peer checkpoints, it first reads what the lost member logged at or
below the jobs it is about to restart (``ReadLog``: from a shared checkpoint directory, or from
a member keeping a copy of the log, ``[checkpoint] copies``), keeps those results as orphans
(announced, so other survivors reuse them too), and only then puts the jobs back: a job whose
own result was logged is answered at once, the others find their logged descendants in the
orphan table when they spawn them. The jobs wait at most ``[checkpoint] read_wait_s`` (the node
reports ``LogRead`` by then, empty if it found nothing).

Where the log can be read is the operator's storage assumption (docs/operations.md): a
directory every peer mounts, or copies on other members; with neither, a crashed peer's log is
on its own machine, read only by a resume.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from satind.core.effects import INFO, Effects, QueueRoot, ReadLog, StealUpdate, ToCompute
from satind.core.orphans import keep_orphan
from satind.net import messages as m
from satind.net.codec import Encoded
from satind.work.events import ChildResult, JobArrived
from satind.work.jobs import Job

if TYPE_CHECKING:
    from satind.core.state import PeerState


@dataclass(frozen=True, slots=True)
class LogRead:
    """What the node read of lost member ``peer``'s log for the jobs held under ``token``
    (``source``: where from; ``error``: why nothing)."""

    token: int
    peer: str
    results: Sequence[m.JobResult] = ()
    source: str = ""
    error: str = ""


def keepers(state: PeerState, peer: str) -> tuple[str, ...]:
    """The members that keep copies of ``peer``'s log, as ``peer`` picks them: the next
    ``[checkpoint] copies`` names after it among the alive members on other machines (the
    node is the name's first part). Never on its own machine: a machine's crash takes all its
    peers, and they share the daemon's checkpoint directory anyway. ``peer`` and a survivor
    agree as long as their views of the members do."""
    count = state.cfg.checkpoint.copies
    if count <= 0:
        return ()
    node = peer.split("/", 1)[0]
    ring = sorted(
        mem.name
        for mem in state.table.alive()
        if mem.name != peer and mem.name.split("/", 1)[0] != node
    )
    after = [name for name in ring if name > peer] + [name for name in ring if name < peer]
    return tuple(after[:count])


def hold(state: PeerState, lost: str, jobs: list[Job], root: Job | None = None) -> Effects:
    """Jobs ``lost`` took wait here while its log is read (instead of restarting at once);
    or, when ``lost`` was a run's master and this peer takes the run over, the run's new
    root waits (``root``: everything logged for the run is wanted)."""
    state.log_reads += 1
    token = state.log_reads
    state.reading_logs[token] = (jobs, root)
    tops = jobs if root is None else [root]
    wanted = tuple((job.run.run_id, job.path) for job in tops)
    keep = tuple(name for name in keepers(state, lost) if name != state.name)
    return [ReadLog(token, lost, wanted, keep)]


def on_read(state: PeerState, event: LogRead) -> Effects:
    """File what the log held as orphans kept here, then restart the held jobs."""
    jobs, root = state.reading_logs.pop(event.token, ([], None))
    fx: Effects = []
    found = 0
    for result in event.results:
        run = state.runs.active.get(result.run_id)
        if run is None or run.state.aborted:
            continue
        if result.error is not None or result.value is None:
            continue
        if state.orphans.kept_result((result.run_id, result.path)) is None:
            found += 1
            state.orphans.counters.results_from_logs += 1
        fx += keep_orphan(state, result)
    if event.results or event.error:
        state.note(
            INFO,
            __name__,
            "read %d results of %s's log (%s) for %s%s",
            found,
            event.peer,
            event.source or "nowhere",
            "the new root" if root is not None else f"{len(jobs)} restarted jobs",
            f": {event.error}" if event.error else "",
        )
    for job in jobs:
        live = state.runs.active.get(job.run.run_id)
        if job.run.aborted or live is None or live.state is not job.run:
            continue  # its run ended, was cancelled or resumed anew while the log was read
        kept = state.orphans.kept_result((job.run.run_id, job.path))
        if kept is not None and kept.value is not None:
            state.orphans.counters.results_reused += 1
            fx.append(ToCompute(ChildResult(job, Encoded(kept.value), None, list(kept.needs))))
        else:
            fx.append(ToCompute(JobArrived(job, restarted=True)))
    run = state.runs.active.get(root.run.run_id) if root is not None else None
    if root is not None and run is not None and run.root is root and not root.run.aborted:
        fx += [QueueRoot(root), StealUpdate()]
    return fx
