"""Settings of the compute side: the engine of one peer, stealing, shared objects.

A section of satind's configuration (satind/config/__init__.py says how the sections are
grouped): each field's default is the only place that default lives, with its unit and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

StealAlgorithm = Literal["rs", "crs"]


@dataclass(frozen=True)
class EngineConfig:
    """The compute side of one peer."""

    # seconds. CPython hands the GIL between threads every switch interval. A pure-Python leaf
    # holds the GIL, so the trio thread answers a steal request only after waiting up to this
    # long, a few times per request. 5 ms (CPython's default) makes a steal round trip cost
    # 10-20 ms; 0.2 ms keeps it near 1 ms at a compute cost we measured below 1%
    # (docs/benchmarks.md).
    switch_interval_s: float = 0.0002
    # count. How deep stolen jobs may nest on the compute thread's stack while a sync waits
    # for stolen children. Past it the waiting sync stops stealing and only waits, so the
    # Python stack cannot overflow.
    max_steal_nesting: int = 48
    # bytes. Stack of the compute thread: nested jobs and stolen work recurse on it.
    thread_stack_bytes: int = 256 * 1024 * 1024
    # bytes. The interpreter data stack chunk the compute thread starts its work in
    # (satind/engine/datastack.py): half of it holds the frames of jobs, so a recursion that
    # stays within ~500 KB of frames never maps and unmaps a chunk per call. 0: CPython's own
    # 16 KB chunks. Reserved address space; only touched pages become resident.
    data_stack_bytes: int = 1024 * 1024
    # frames. Python recursion limit of the compute thread (see thread_stack_bytes): what bounds
    # how deep a run may nest on a peer. A level of nesting costs about 4 Python frames (the
    # job, its sync, the engine's run and sync loops) plus the plugin's own, so trees a few
    # thousand levels deep fit; with the engine compiled (setup.py) only the job's own frames
    # count, and a level takes at most ~1.6 KB of the thread's stack: 20,000 levels fit in
    # thread_stack_bytes. A plugin whose spawns recurse without a base case meets it
    # quickly: the job that meets it fails with LimitExceeded naming this setting, and so does
    # its run; the engine catches a RecursionError that lands in its own code the same way,
    # so no job is lost and the peer goes on. (Counting depth explicitly would cost every
    # sync; the interpreter counts anyway.)
    recursion_limit: int = 20_000
    # jobs. Jobs one job may have spawned and not yet synced. A spawn past it raises
    # LimitExceeded in the plugin's code: a job that spawns without bound fails instead of
    # filling the peer's memory (a waiting job costs about 200 bytes plus its arguments).
    # With recursion_limit it bounds the jobs alive on a peer: a bounded number of frames,
    # each with at most this many children waiting. Checked per frame because a count per
    # frame is one compare on the spawn path, and the length of the whole queue is a call.
    max_pending_jobs: int = 1_000_000
    # allocations. CPython's cyclic garbage collector runs a young collection every this many
    # container allocations (its default, 700, suits small programs). Every spawn allocates a
    # job record that lives until its parent's frame ends, so at 700 the collector cost about
    # as much as the spawn itself (spawn/sync 2.2 us instead of 1.0 us, docs/benchmarks.md).
    # A peer process raises it; 0 leaves CPython's setting alone.
    gc_young_threshold: int = 50_000
    # jobs. A frame keeps its finished children until it ends: an orphan frame that is
    # aborted, or a drained peer's, hands them on for reuse (satin-ft §3.2), and a checkpoint
    # logs them. A frame that has spawned more than this many keeps them only until its next
    # sync returns: a loop that spawns and syncs a million times would otherwise hold a
    # million records that the garbage collector walks (Table III's loop: 400 ns instead of
    # 154, docs/benchmarks.md) and ~290 MB. Such a frame, aborted after a sync, computes the
    # children it had synced again. 0: no frame keeps synced children.
    keep_synced_children: int = 1000
    # satind.abort() cancels the children of the running job (engine/speculation.py). False
    # makes it do nothing, as a sequential run does: the answer stays right (a search that
    # aborts must be correct without it, satin-grid-programming-model §3.3), only the
    # speculative work is no longer cut. For measuring what aborts save (benchmarks/).
    aborts: bool = True
    # seconds. A run's root that has waited this long in its master's queue (no idle thief
    # took it: every compute thread is busy with other runs' work) is started by the
    # master's compute thread at its next job boundary, on top of the frame it is in, so a
    # run submitted beside a long one begins within seconds. The price: the frame beneath
    # waits for that root to end before it can go on (one thread, one stack), so the run it
    # belongs to may end later than it would have. inf: never; a root then waits for an
    # idle peer (a thief) or for the frames beneath to end (docs/operations.md).
    nest_roots_after_s: float = 2.0
    # seconds. A compute side waiting for work wakes this often even if nothing was posted
    # (a guard against a lost wake-up; posts wake it at once).
    wait_poll_s: float = 1.0
    # seconds. At shutdown, how long the peer waits for its compute thread (a job deep in a
    # long leaf reaches no safe point; the thread is a daemon, so the process exits anyway).
    stop_join_s: float = 1.0


@dataclass(frozen=True)
class StealConfig:
    """Victim choice and pacing of steal attempts (satin-grid-programming-model §4.1.2)."""

    # "crs": cluster-aware random stealing, one asynchronous wide-area steal in flight while
    # stealing synchronously inside the own cluster. "rs": plain random stealing.
    algorithm: StealAlgorithm = "crs"
    # seconds. A synchronous steal request unanswered for this long counts as failed; the
    # victim may be busy in a long leaf holding the GIL or may be gone.
    request_timeout_s: float = 2.0
    # seconds. A wide-area steal unanswered this long is given up, so CRS can send another.
    wide_request_timeout_s: float = 10.0
    # count. Failed attempts in a row before backing off. Idle thieves on a 2-core machine
    # compete with working peers for the CPU, so they must not spin.
    backoff_after: int = 4
    # seconds. A victim that has heard nothing of a job it gave away for this long asks the
    # thief about it (custody.py): a lost steal reply or result is recovered after about this
    # long. Queries are one small message per stolen job per interval.
    custody_check_s: float = 5.0
    # jobs. A thief whose compute side has nothing to do (no sync of its own waits) asks for
    # up to this many; the victim gives half of the siblings at the oldest end of its queue
    # (jobs spawned by the same frame: a flat bag, a search's first level), at most this many,
    # so that a thief does not pay a round trip per job of a bag (steal-half, as work-first
    # schedulers do). A thief waiting in a sync takes one job. 1: one job per steal (the
    # paper's rule).
    batch_max: int = 32
    # jobs. ... but only when at least this many siblings lie there: a frame that spawned a
    # bag. A divide-and-conquer frame's few children (one of fib's two, three of a 4-way
    # split) go one per steal, the largest first, as the paper has it: taking half of them
    # would leave a draining or crashing thief holding more of the tree.
    batch_from: int = 8
    # seconds. First and largest pause between failed steal rounds (doubling in between).
    backoff_min_s: float = 0.0005
    backoff_max_s: float = 0.02


@dataclass(frozen=True)
class SharedConfig:
    """Shared objects (satind/shared.py, core/sharing.py; satin-grid-programming-model §4.2)."""

    # seconds. A peer's global calls are combined for this long into one message per member
    # (the paper's update combining): fewer, larger messages; a replica elsewhere lags by it.
    combine_s: float = 0.02
    # bytes. ... or until this much is waiting, whichever comes first.
    combine_bytes: int = 256 * 1024
    # seconds. A stolen job whose guard is false waits this long for updates before its
    # replicas are fetched from its victim (and again after each fetch that did not help).
    guard_wait_s: float = 0.2
    # seconds. A replica asked for and not received (a lost message) is asked for again
    # after this long.
    fetch_retry_s: float = 1.0
    # seconds. Anti-entropy (engine/replication.py): this often, while it holds replicas, a
    # peer sends one other member (each in turn) a digest of what it has applied, and gets
    # back the global calls it lacks, so replicas converge though updates are sent once.
    # 0: never (lost calls are then made good only by guards' fetches).
    digest_s: float = 0.5
    # bytes per shared object. Recent global calls each peer keeps to answer digests; a peer
    # further behind than this gets the whole replica instead.
    log_bytes: int = 1024 * 1024
