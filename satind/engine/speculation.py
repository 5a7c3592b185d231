"""Inlets and abort on the compute side: speculative parallelism (satin-grid-programming-model
§3.3 and §4.3).

**Inlets.** ``fn.spawn_inlet(handler, ...)`` hangs ``handler`` on the child's ``Job``. When
that child raises — here, or on the peer that stole it, whose result message carries the
exception — the child is finished as usual and is queued as *ready* for its parent's frame
(``Worker.ready``). The handler runs in the parent's sync loop, with the parent as the current
frame, one at a time: never while the parent's own code runs (the parent is blocked in its
sync), never beside another handler (there is one compute thread), so a handler may read and
change the spawner's variables without a lock. This is Satin's guarantee, kept without
Satin's extra thread: our spawner is simply suspended in its sync while the handler runs.
What the handler returns becomes the child's ``result()``; if it raises, the spawner's other
children are aborted and the spawner's ``sync()`` raises it (the exception leaves the inlet
as it would leave a catch block).

A handled child keeps its exception in ``exc`` (its ``result()`` is the handler's value,
read first): a job whose exception an inlet turned into a value has no result of its own,
so it must never be kept as an orphan or logged in a checkpoint (those keep only jobs whose
``error`` is None), or a re-run would reuse the handler's value as the job's.

**Abort.** ``abort()`` in a frame (its code, or one of its handlers) cancels every child
that has not finished. When a frame is the current one, none of its children runs on this
compute thread (they run only inside its sync), so each outstanding child is either queued
here — dropped at once — or out on another peer (stolen, or an orphan's kept result being
fetched): the frame stops counting them (its sync does not wait for them, the abort costs
no round trip) and the network side sends each thief an ``Abort`` (core/aborts.py). The
frame remembers how many children it had spawned then (``Job.aborted_below``): a child of a
lower index that comes back later — a late result, a job taken back from a dead thief — is
dropped on arrival. A thief that receives an ``Abort`` drops the job if it is queued, or
cuts it (``Cancel``): its frames unwind at their next spawn or sync like an orphan subtree's
(engine/unwind.py), but keep nothing.
"""

from __future__ import annotations

from collections import deque

from satind.work.errors import aborted
from satind.work.jobs import Job
from satind.work.jobs import is_aborted as is_aborted


def call_with_inlet(job: Job) -> Exception | None:
    """Run a child that has an inlet; the exception it raised, or None (its value is set).

    Its exception is the inlet's input, the usual outcome of a speculative search rather than
    a failure, so it is caught here, in a module that is not compiled: compiled code adds a
    traceback entry to every exception that crosses one of its calls, caught or not, and
    that entry (a code object and a frame made on the spot) cost more than the spawn itself
    (docs/benchmarks.md, Table III's inlet rows). The engine's own unwinding exceptions are
    BaseExceptions and pass through."""
    try:
        job.value = job.fn(*job.args)
    except Exception as exc:
        return exc
    return None


def drop_children(frame: Job, jobs: deque[Job]) -> int:
    """Remove ``frame``'s children from the work queue and mark them aborted; returns how
    many. A frame's queued children are usually on top of the queue (the owner's end); jobs
    stolen for us while it waited may lie above them, so the rest of the queue is searched
    too. Safe beside a thief on the other end, as ``WorkQueue.drop_run`` is."""
    dropped = 0
    while jobs:
        try:
            job = jobs.pop()
        except IndexError:
            break
        if job.parent is not frame:
            jobs.append(job)
            break
        job.exc = aborted()
        dropped += 1
    for job in [j for j in jobs if j.parent is frame]:
        try:
            jobs.remove(job)
        except ValueError:
            continue  # a thief took it meanwhile: the network side aborts it there
        job.exc = aborted()
        dropped += 1
    return dropped


__all__ = ["aborted", "call_with_inlet", "drop_children", "is_aborted"]
