"""Job records, reproducible job ids (path stamps) and per-run bookkeeping on one peer.

A job id is (run id, path). The root's path is empty; the i-th spawn of a job has its parent's
path plus i. Re-executing a job respawns exactly the same ids, which orphan re-linking needs
(satin-fault-tolerance-malleability-migration §3.7). The Satin paper numbers jobs as
``parent * max_branching + i``; we use its "level stamps" form instead for every plugin, as a
byte string with one unsigned LEB128 varint per level: one byte per level while the index is
below 128, no overflow when the branching factor is unknown, and "a is an ancestor of b" is
``b.startswith(a)`` because a varint sequence is a prefix-free code.

The ``Job`` record doubles as the handle a spawn returns. It is created on the hot path of
every spawn, so it carries only what a local job needs; its path is computed on demand (when
the job is stolen, or when recovery asks) from the parent chain.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

# Defined apart: an exception class is not compiled with this module (setup.py).
from satind.work.errors import ResultNotReady, aborted

ROOT_PATH = b""
# Application counters (``satind.count``): their names, and how many one run may have (each
# travels in every run-statistics reply and line).
APP_COUNTER = re.compile(r"[a-z0-9_]{1,32}")
MAX_APP_COUNTERS = 16


def child_path(parent: bytes, index: int) -> bytes:
    """The path of the ``index``-th child of the job at ``parent``."""
    if index < 0x80:
        return parent + bytes((index,))
    out = bytearray(parent)
    while True:
        byte = index & 0x7F
        index >>= 7
        if index:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def path_indices(path: bytes) -> list[int]:
    """Decode a path into the child indices from the root.

    Raises:
        ValueError: the path ends inside a varint.
    """
    out: list[int] = []
    value = shift = 0
    for byte in path:
        value |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
        else:
            out.append(value)
            value = shift = 0
    if shift:
        raise ValueError(f"truncated job path {path.hex()}")
    return out


def path_from_indices(indices: list[int]) -> bytes:
    path = ROOT_PATH
    for index in indices:
        path = child_path(path, index)
    return path


def is_valid_path(path: bytes) -> bool:
    """A well-formed path ends on a varint boundary."""
    return not path or path[-1] < 0x80


def is_ancestor(ancestor: bytes, path: bytes) -> bool:
    """True when ``ancestor`` is ``path`` itself or lies above it in the tree."""
    return path.startswith(ancestor)


def format_path(path: bytes) -> str:
    """Human form of a path: ``/`` for the root, ``/0/3/1`` below it."""
    return "/" + "/".join(str(i) for i in path_indices(path))


def is_placed(job: Job) -> bool:
    """A job its run's master pushed to this peer (an SPMD entity job, an iterative task):
    only this peer may run it — no thief takes it (core/victim.py) — and its run waits for
    it, so a frame of another run that waits here must run it rather than leave it queued
    (engine/worker.py ``sync_frame``). A run's root (no origin) is never one."""
    return job.parent is None and job.run.pushed and getattr(job, "origin", None) is not None


class _Unset:
    """Marks a result slot not yet filled (None is a legitimate result)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<unset>"


UNSET: Any = _Unset()


class RunState:
    """What the compute thread of one peer knows of a run, and its counters there.

    The counters live here, not in a nested object, because the compute thread updates them
    at the end of every job: one attribute hop fewer on the hot path. Names are those of the
    run JSON ``stats``.
    """

    __slots__ = (
        "abort_wasted_s",
        "aborted",
        "aborts",
        "app",
        "busy_s",
        "entered",
        "epoch",
        "inv_branching",
        "jobs_cancelled",
        "jobs_run",
        "leaves_redone",
        "leaves_run",
        "orphans",
        "plugin",
        "progress",
        "pushed",
        "queued_at",
        "redo",
        "resume_from",
        "run_id",
        "spawns",
        "syncs",
        "weight",
    )

    def __init__(self, run_id: str, plugin: str, inv_branching: float, epoch: int = 0) -> None:
        self.run_id = run_id
        # The run's epoch this state belongs to (a new master's epoch has a new RunState):
        # the incarnation of the shared objects its jobs make (satind/shared.py).
        self.epoch = epoch
        self.plugin = plugin
        # 1 / the plugin's maximum branching factor: a child's share of its parent's work.
        self.inv_branching = inv_branching
        self.spawns = 0
        self.syncs = 0
        self.jobs_run = 0
        # Jobs begun here that came from elsewhere (the root, stolen and pushed jobs): none
        # on any peer, and the run is waiting for peers (stats.waiting_for_peers).
        self.entered = 0
        # When its master queued its root here (WorkerBase.queue_root, on the compute side's
        # wall_clock), inf elsewhere: how long a root has waited, for
        # EngineConfig.nest_roots_after_s.
        self.queued_at = math.inf
        # Its share of thieves' steals beside other runs' jobs in a queue (RunInfo.weight,
        # work/workqueue.py).
        self.weight = 1.0
        self.leaves_run = 0
        self.leaves_redone = 0
        # Speculation (engine/speculation.py): abort() calls that cancelled something, jobs
        # dropped before they finished (queued, or unwound here after an Abort came), and
        # the seconds this peer had spent on stolen jobs it then dropped.
        self.aborts = 0
        self.jobs_cancelled = 0
        self.abort_wasted_s = 0.0
        # Seconds the compute side spent on this run's jobs, not blocked waiting for work or
        # for stolen children (engine/worker_base.py ``_clock``): busy / (peers x elapsed) is
        # the run's efficiency from the peers' own accounting, without a sequential baseline.
        self.busy_s = 0.0
        # Fraction of the run's tree this peer finished (shares from job ids; see Job.share).
        self.progress = 0.0
        # Set (by the trio thread) when the run is over: its frames still waiting here are
        # abandoned and its queued jobs dropped (see worker.RunAborted).
        self.aborted = False
        # path -> holder of a kept result (core/orphans.py); None while there is none, so
        # that a spawn pays one attribute read in the common case.
        self.orphans: dict[bytes, str] | None = None
        # Paths of jobs this peer restarted after a loss; a leaf below one of them is work done
        # again (``leaves_redone``). None until a restart, so a leaf pays one attribute read.
        # Written by the compute thread only (``JobArrived.restarted``).
        self.redo: list[bytes] | None = None
        # The plugin's own counters (``satind.count``), by their stats name; None until one.
        self.app: dict[str, int] | None = None
        # An iterative or SPMD run (satind/iterative.py, satind/spmd.py): its tasks and entity
        # jobs are pushed to chosen members by its master (core/iterative.py, core/spmd/),
        # never stolen; its root stays on its master.
        self.pushed = False
        # Where its driven root resumes: the last barrier's encoded state, set by the core
        # before it queues the root (core/start.py); None: from the start.
        self.resume_from: bytes | None = None

    def counters(self) -> dict[str, int | float]:
        out: dict[str, int | float] = {
            "spawns": self.spawns,
            "syncs": self.syncs,
            "jobs_run": self.jobs_run,
            "jobs_entered": self.entered,
            "leaves_run": self.leaves_run,
            "leaves_redone": self.leaves_redone,
            "progress": self.progress,
            "aborts": self.aborts,
            "jobs_cancelled": self.jobs_cancelled,
            "abort_wasted_s": self.abort_wasted_s,
            "busy_s": self.busy_s,
        }
        if self.app:
            out.update(self.app)
        return out

    def count(self, name: str, n: int) -> None:
        """``satind.count``: add ``n`` to the application counter ``name``."""
        key = f"app_{name}"
        app = self.app
        if app is None:
            app = self.app = {}
        if key not in app:
            if not APP_COUNTER.fullmatch(name):
                raise ValueError(
                    f"counter name {name!r}: use 1 to 32 lowercase letters, digits and _"
                )
            if len(app) >= MAX_APP_COUNTERS:
                raise ValueError(f"counter {name!r}: a run has at most {MAX_APP_COUNTERS} counters")
            app[key] = 0
        app[key] += int(n)

    def __repr__(self) -> str:
        return f"<RunState {self.run_id} {self.plugin} {self.counters()}>"


class Job:
    """One spawned invocation: the record in the work queue and the handle a spawn returns.

    Attributes set at spawn: ``fn`` (the plain function), ``args``, ``parent`` (the Job whose
    execution spawned it; None for a root or a job stolen from another peer), ``index`` (its
    position among the parent's spawns), ``run`` and ``share`` (its fraction of the run's
    tree, parent share / max branching: how progress is estimated from job ids).
    """

    __slots__ = (
        "_path",
        "aborted_below",
        "args",
        "exc",
        "fn",
        "index",
        "inlet",
        "kids",
        "needs",
        "nshared",
        "nspawn",
        "nsync",
        "origin",
        "parent",
        "pending",
        "run",
        "share",
        "sib",
        "value",
    )

    def __init__(
        self,
        fn: Callable[..., Any],
        args: Any,
        parent: Job | None,
        index: int,
        run: RunState,
        share: float,
    ) -> None:
        self.fn = fn
        # A tuple; for a stolen job, its encoded form until the compute side decodes it.
        self.args: Any = args
        self.parent = parent
        self.index = index
        self.run = run
        self.share = share
        self.value: Any = UNSET
        # Children spawned and not yet finished; only the compute thread changes it.
        self.pending = 0
        self.nspawn = 0
        self.nsync = 0
        # Its finished children, linked through ``sib`` (newest first), while it runs: what an
        # aborted orphan frame keeps as orphans (worker.abandon). Cleared when it finishes, so
        # that parent and children do not keep each other alive.
        self.kids: Job | None = None
        # Set by ``spawn_inlet``: the spawner's handler of this job's exception. A store per
        # spawn costs about a nanosecond compiled; a missing attribute makes every test of
        # it raise and catch an AttributeError.
        self.inlet: Callable[[Exception], Any] | None = None
        # Not set here, to keep the spawn path short (every store costs): ``exc`` (read only
        # through ``error``), ``_path`` (see ``path``) and ``origin`` (set by whoever creates a
        # job without a local parent: the peer id its result goes to, None for a root).

    exc: BaseException | None
    origin: str | None
    # Shared objects this job made (satind/shared.py): part of their ids. Set on first use.
    nshared: int
    # A job without a local parent, finished: what this peer had applied to the run's shared
    # objects (``ReplicaDigest`` records) when its result left the compute side; its result
    # is applied at the parent's peer only once that peer's replicas have seen as much
    # (engine/worker.py, ``Worker.held``). Set only on such jobs.
    needs: list[Any]
    # Set only on a frame that aborted its children (engine/speculation.py): its children of
    # a smaller index that had not finished then are aborted.
    aborted_below: int
    _path: bytes
    sib: Job | None  # the finished sibling linked before this one (set when it is linked)

    @property
    def error(self) -> BaseException | None:
        """The exception the job raised, or None."""
        return getattr(self, "exc", None)

    @property
    def path(self) -> bytes:
        """The job's path stamp, computed from the parent chain and cached."""
        try:
            return self._path
        except AttributeError:
            pass
        # Iterative, not recursive: a stolen deep job must not blow the trio thread's stack.
        chain: list[Job] = []
        job: Job = self
        while not hasattr(job, "_path"):
            parent = job.parent
            if parent is None:
                job._path = ROOT_PATH
                break
            chain.append(job)
            job = parent
        path = job._path
        for node in reversed(chain):
            path = child_path(path, node.index)
            node._path = path
        return path

    def set_path(self, path: bytes) -> None:
        """Give a job with no local parent (root, stolen, restarted) its id."""
        self._path = path

    @property
    def done(self) -> bool:
        return self.value is not UNSET or self.error is not None

    def result(self) -> Any:
        """The child's value after ``sync()``; raises the child's exception if it raised.

        Raises:
            ResultNotReady: called before the sync that waits for this job.
        """
        value = self.value
        if value is UNSET:
            exc = self.error
            if exc is not None:
                raise exc
            parent = self.parent
            if parent is not None and self.index < getattr(parent, "aborted_below", 0):
                raise aborted()  # out on a thief when its parent aborted it
            raise ResultNotReady(
                f"result() of {getattr(self.fn, '__qualname__', self.fn)!r} before sync(): "
                "call sync() after spawning and before reading results"
            )
        return value

    def __repr__(self) -> str:
        state = "done" if self.done else "pending"
        name = getattr(self.fn, "__qualname__", repr(self.fn))
        return f"<Job {self.run.run_id}{format_path(self.path)} {name} {state}>"


def root_of(job: Job) -> Job:
    """The job at the bottom of ``job``'s frame chain here (a root or a stolen job)."""
    while job.parent is not None:
        job = job.parent
    return job


def make_root(fn: Callable[..., Any], args: Any, run: RunState) -> Job:
    """The root job of a run: no parent, path empty, the whole tree's share. ``args``: a
    tuple, or its encoded form (``codec.Encoded``) for a root a new master restarts."""
    job = Job(fn, args, None, 0, run, 1.0)
    job.set_path(b"")
    job.origin = None
    return job


def is_aborted(job: Job) -> bool:
    """Whether ``job`` is a child its parent aborted before it finished (a result or a
    restart that arrives for it now is dropped)."""
    parent = job.parent
    return parent is not None and job.index < getattr(parent, "aborted_below", 0)
