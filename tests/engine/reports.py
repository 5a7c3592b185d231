"""Test doubles of the compute side's hooks record its reports (``work/reports.py``) under the
names the tests read: ``report`` calls the double's method of that name with the report's
fields (``want_work`` without ``frames``)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from satind.work import reports as r

NAMES: dict[type, str] = {
    r.WantWork: "want_work",
    r.JobFinished: "job_finished",
    r.OrphanHit: "orphan_hit",
    r.OrphanResult: "orphan_result",
    r.SubtreeDropped: "subtree_dropped",
    r.ChildrenAborted: "children_aborted",
    r.SharedCallMade: "shared_update",
    r.SharedSend: "shared_send",
    r.ReplicaKept: "replica_kept",
    r.GuardWaiting: "guard_waiting",
    r.ResultWaiting: "result_waiting",
    r.TaskReady: "task_ready",
    r.BarrierPassed: "barrier",
    r.EntityDone: "entity_done",
    r.SpmdIteration: "spmd_iteration",
    r.JobLogged: "job_logged",
    r.SnapshotTaken: "snapshot_taken",
}


def to_method(target: Any, event: r.Report) -> None:
    """Call ``target``'s method for ``event`` (a report it has no method for is ignored)."""
    method = getattr(target, NAMES[type(event)], None)  # KeyError: a report NAMES lacks
    if method is None:
        return
    if isinstance(event, r.WantWork):
        method(event.wanted, event.run_id)
    else:
        method(*(getattr(event, f.name) for f in fields(event)))
