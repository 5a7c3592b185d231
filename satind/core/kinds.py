"""Run kinds behind one table: what the generic rules ask of iterative and SPMD runs.

A divide-and-conquer run (``Plugin.kind`` "divide-and-conquer") is what the generic rules
themselves describe: a job stolen, lost with its thief, taken back or aborted is restarted,
re-linked or dropped by custody, restart, orphans and aborts alone. The other two kinds add
rules of their own — an iterative run's tasks are pushed and placed again by the master's
scheduler (core/iterative.py, Casanova et al.), an SPMD run's entity jobs are pinned to their
holders and a lost one rolls the run back (core/spmd/, mpi-ios) — and register them here
when their module is imported (the node and the simulator import every kind). The generic
rules look a job's kind up (``of_job``) or ask every kind (``each``) and import none: adding a
kind adds a module and a registration, not a branch in custody, restart or drain.

A rule left None means "as divide-and-conquer".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from satind.core.effects import Effects
from satind.descriptor import RunKind
from satind.net import messages as m
from satind.work.jobs import Job

if TYPE_CHECKING:
    from satind.core.state import PeerState


@dataclass(frozen=True)
class KindRules:
    kind: RunKind
    # Whether a job is one of this kind's own (not its root: the root is a plain job).
    owns: Callable[[Job], bool]
    # (state, job, thief, why): the job was given to ``thief``, which is gone. Its effects
    # replace the generic restart.
    lost: Callable[[PeerState, Job, str, str], Effects] | None = None
    # (state, job, thief, now): the thief said it does not have the job ("unknown": it takes no
    # part in the run, or lost it): taken back. None: run it here, as a divide-and-conquer
    # job is.
    taken_back: Callable[[PeerState, Job, str, float], Effects] | None = None
    # (state, job): an aborted or orphaned job of this kind that never started: dropped.
    # True if it was one (nothing more to do for it).
    drop_unstarted: Callable[[PeerState, Job], bool] | None = None
    # (state, member): a member is gone; what this kind loses with it.
    member_gone: Callable[[PeerState, str], Effects] | None = None
    # (state, thief, its CPU share, now): a steal request this peer could not serve.
    idle_thief: Callable[[PeerState, str, float, float], Effects] | None = None
    # (state, now): this peer starts draining.
    draining: Callable[[PeerState, float], Effects] | None = None
    # (state): whether this peer still holds work of this kind that must move before it
    # leaves.
    holds_work: Callable[[PeerState], bool] | None = None
    # (state, run id): the run is over here (it ended, or was dropped).
    forget_run: Callable[[PeerState, str], None] | None = None
    # (state, run id): a run not known here ended: what came for it early.
    forget_unknown: Callable[[PeerState, str], None] | None = None
    # (state, job, now): the run's driver (its root, on the master) made a task to place.
    task_ready: Callable[[PeerState, Job, float], Effects] | None = None
    # (state, result, thief, now): what a result that came back means for the run beyond its
    # custody (a task done, an entity's step done).
    result: Callable[[PeerState, m.JobResult, str, float], Effects] | None = None


# In the order the generic rules ask them: an SPMD entity job is pushed too, so SPMD decides
# first whether a job is its own.
ORDER: tuple[RunKind, ...] = ("spmd", "iterative")
_KINDS: dict[str, KindRules] = {}


def register(rules: KindRules) -> None:
    """Called by a kind's module when it is imported."""
    if rules.kind not in ORDER:
        raise ValueError(f"unknown run kind {rules.kind!r}: add it to kinds.ORDER")
    _KINDS[rules.kind] = rules


def each() -> list[KindRules]:
    """Every registered kind, in ``ORDER``."""
    return [_KINDS[k] for k in ORDER if k in _KINDS]


def of_job(job: Job) -> KindRules | None:
    """The kind whose own job this is; None for a divide-and-conquer job (or a root)."""
    for rules in each():
        if rules.owns(job):
            return rules
    return None


def dropped_unstarted(state: PeerState, job: Job) -> bool:
    """An aborted or orphaned job that its kind drops because it never started (an SPMD
    entity job still waiting for its ghosts); True if so: nothing more to do for it."""
    kind = of_job(job)
    return kind is not None and kind.drop_unstarted is not None and kind.drop_unstarted(state, job)


def task_ready(state: PeerState, job: Job, now: float) -> Effects:
    """A driven root made a task: the task's kind places it. A task no kind claims is an
    iterative run's (its driver pushes plain jobs; an SPMD driver's are entity jobs)."""
    kind = of_job(job) or _KINDS.get("iterative")
    if kind is None or kind.task_ready is None:
        raise LookupError(f"no run kind places {job!r}")
    return kind.task_ready(state, job, now)


def result_came(state: PeerState, msg: m.JobResult, thief: str, now: float) -> Effects:
    """What a result that came back means to each kind's runs here."""
    fx: Effects = []
    for kind in each():
        if kind.result is not None:
            fx += kind.result(state, msg, thief, now)
    return fx
