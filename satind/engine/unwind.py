"""Aborting orphan subtrees, on the compute side (satin-fault-tolerance §3.2).

A job stolen from a peer that is gone has no parent to return to: the peer that ran it for
the gone one would compute its whole subtree for nobody. The network side tells the compute
side (``Orphaned``); the compute side remembers the subtree's root in its **cut** set and, at
the next sync of any frame below that root, unwinds those frames (``SubtreeAborted``). On the
way each frame is **abandoned**: its finished children are kept as orphans (announced by
tuples, reused when the restarted parent spawns them again), its children still queued go
(the restarted parent spawns them again), and results other peers send later for its stolen
children are kept too. Frames of other work that run below the cut frames go on.

A frame can only be cut at a sync: a leaf that is computing finishes first, and its result is
kept with the others.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from satind.engine.frames import drop_queued_children, root_of
from satind.work.jobs import Job


class SubtreeAborted(BaseException):
    """Raised in a frame of an orphan subtree (see ``Orphaned``). It unwinds the subtree's
    frames up to its root, each one abandoned on the way (``abandon``); the root is dropped.
    Frames below the root, of other work, go on. A BaseException, so plugin code's ``except
    Exception`` cannot swallow it."""

    def __init__(self, root: Job) -> None:
        super().__init__(root)
        self.root = root


def abandon(frame: Job, jobs: deque[Job], keep: Callable[[Job], None] | None) -> None:
    """Abort a frame of an orphan subtree: ``keep`` its finished children as orphans, and
    drop its children still queued here (the restarted parent spawns them again). Children
    other peers stole come back as results and are kept then (``orphaned_result``). A frame
    of a cancelled subtree (engine/speculation.py) keeps nothing: ``keep`` is None."""
    drop_queued_children(frame, jobs)
    kid = frame.kids
    while kid is not None and keep is not None:
        if kid.error is None:
            keep(kid)
        kid = kid.sib
    frame.kids = None


def cut_subtree(root: Job, cut: dict[Job, bool]) -> None:
    """Handle Orphaned: remember the subtree's root (until its run is over), its finished
    results to be kept (True; a cancelled subtree's root is False: speculation.py)."""
    for job in [j for j in cut if j.run.aborted]:
        del cut[job]
    if not root.done and not root.run.aborted and root not in cut:
        cut[root] = True


def in_cut(job: Job, cut: dict[Job, bool]) -> bool:
    """Whether ``job`` lies in an orphan subtree being aborted."""
    return bool(cut) and root_of(job) in cut


def orphaned_result(job: Job, exc: BaseException | None, cut: dict[Job, bool]) -> bool:
    """A result another peer sent for a child in an orphan subtree has no frame to go to (or
    soon will not): True when it should be kept as an orphan (not in a cancelled one)."""
    return exc is None and job.parent is not None and cut.get(root_of(job)) is True
