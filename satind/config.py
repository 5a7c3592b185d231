"""Every setting of satind, its default, its unit and why.

This is the only place a default lives. Code reads ``cfg.section.name``; docs point here
instead of restating numbers (restated defaults drift). Presets are built by overriding
(``dataclasses.replace``), in the manner of memberlist's DefaultLANConfig/DefaultWANConfig.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from satind.volatile.heuristics import NAMES as HEURISTICS

StealAlgorithm = Literal["rs", "crs"]
CheckpointPolicy = Literal["orphans", "tic", "sel"]
OnSigterm = Literal["leave", "drain"]


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
    # satind.abort() cancels the children of the running job (engine/speculation.py). False
    # makes it do nothing, as a sequential run does: the answer stays right (a search that
    # aborts must be correct without it, satin-grid-programming-model §3.3), only the
    # speculative work is no longer cut. For measuring what aborts save (benchmarks/).
    aborts: bool = True
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
    # seconds. First and largest pause between failed steal rounds (doubling in between).
    backoff_min_s: float = 0.0005
    backoff_max_s: float = 0.02


@dataclass(frozen=True)
class NetConfig:
    """Framing, caps and timeouts of the wire (DESIGN "Wire and security")."""

    # bytes. Largest frame accepted; a bigger length prefix closes the connection. Big enough
    # for a stolen job carrying a sizeable array, small enough that a hostile prefix cannot
    # make a peer allocate gigabytes.
    max_frame_bytes: int = 64 * 1024 * 1024
    # levels. Nesting cap for application values (job arguments and results), which plugins
    # may nest deeply (a tree as nested tuples); cbor2 refuses deeper input.
    max_depth: int = 200
    # levels. Nesting cap for protocol messages: the deepest message nests 5 levels, so 16
    # leaves room for new fields and refuses deep junk before cbor2 recurses into it.
    max_message_depth: int = 16
    # count. CBOR items (integers, strings, array and map entries...) one message may hold.
    # cbor2 builds a Python object of tens of bytes per item, so a 16 MiB frame of one-byte
    # items would cost gigabytes and seconds; a frame longer than this many bytes is scanned
    # first and refused when over (codec.scan_items). The largest legitimate messages (orphan
    # tables in chunks of ft.tuples_per_message, hand-overs in chunks) stay well below.
    max_items: int = 262_144
    # seconds. Connect plus handshake must finish within this.
    connect_timeout_s: float = 5.0
    # seconds. Closing a connection (a TLS goodbye to a peer that may be gone) gives up after
    # this long.
    close_timeout_s: float = 1.0
    # seconds. A frame whose length prefix has arrived must arrive whole within this plus its
    # length at min_receive_rate: a sender that stalls inside a frame (deliberately or not)
    # is cut off instead of pinning the half-received frame in memory forever. Idle
    # connections between frames have no timeout: peers and clients keep links open.
    read_timeout_s: float = 30.0
    # bytes per second. The slowest transfer a frame is allowed (see read_timeout_s): 64 MiB
    # may take 30 s + 64 s. Slower than any link peers compute over (the wide-area links of
    # the Satin papers' experiments are 10-100 times faster).
    min_receive_rate: float = 1024.0 * 1024
    # bytes. Frames being received at once from members, over all their connections. What
    # counts is what arrived, not what a header declares (a stalled header costs its four
    # bytes): a frame whose bytes would go over closes its connection (the sender retries
    # later), so however many members send at once, receiving from them costs at most this.
    # Clients never count here: they have budgets of their own (below), so no client can
    # make a peer refuse its members' frames.
    max_receive_bytes: int = 256 * 1024 * 1024
    # bytes. Frames being received at once from clients, all of them together (counted as
    # for members). Smaller than the members' budget: clients submit and ask, members move
    # jobs and results.
    max_client_receive_bytes: int = 128 * 1024 * 1024
    # bytes. Frames being received at once from one client certificate, over all its
    # connections (connections count by the certificate's name, tls.client_base_name): one
    # client cannot use up what the others need. Room for one frame of max_frame_bytes and
    # the small requests of its other connections.
    max_receive_bytes_per_client: int = 80 * 1024 * 1024
    # bytes. Messages queued for one connection and not yet written, counting what is being
    # written at the moment and what holding each costs besides its bytes (net/outbox.py):
    # memory, not payload. A reader that stops reading (a stuck client) makes its
    # connection's queue grow; past this, the connection is closed and the queued messages
    # dropped (what was lost is recovered like any lost message: steals time out, custody
    # queries resend, clients ask again). Room for one frame of max_frame_bytes.
    max_outbox_bytes: int = 80 * 1024 * 1024
    # bytes. The same, over all connections to members together.
    max_send_bytes: int = 256 * 1024 * 1024
    # bytes. The same, over all connections to clients together: a client that does not
    # read never makes a peer drop what it sends its members.
    max_client_send_bytes: int = 128 * 1024 * 1024
    # bytes. The same, over all connections of one client certificate.
    max_send_bytes_per_client: int = 80 * 1024 * 1024
    # bytes. Once connections that held this much have closed (each counts its TLS state,
    # about 24 KiB, and the most it held at once: a frame being received, messages waiting
    # to be written), or a frame this large has been handled, the peer hands the heap memory
    # it freed back to the system (satind/heap.py; microseconds to a few milliseconds).
    # Without it, a client that did not read, or many connections at once, left the peer's
    # RSS that much higher after they had gone. Smaller trims more often; 0: never.
    trim_after_bytes: int = 4 * 1024 * 1024
    # count. Connections one peer holds at once (peers and clients, being set up or live);
    # more are refused at accept. A peer needs one per other member it talks to (and one
    # file descriptor each: raise `ulimit -n` past 1,024 for systems that large).
    max_connections: int = 2048
    # count. Connections one client certificate may hold at once on one peer (a status
    # --watch, a submit --wait and a few commands need far fewer).
    max_client_connections: int = 16
    # count. Requests one connection may have in flight at a peer (answered from a task: a
    # status that asks every member, a result that waits). Past it, a request is answered
    # at once with an error: a client flooding deep status requests would otherwise hold
    # a task, and the members' answers, per request.
    max_requests_in_flight: int = 64
    # Mutual TLS on every connection. Turning it off exists only to measure what TLS costs
    # (docs/benchmarks.md); a system without it lets anyone who can connect run code.
    tls: bool = True


@dataclass(frozen=True)
class MembershipConfig:
    """SWIM failure detection with the Lifeguard refinements, and gossip (after memberlist's
    DefaultLANConfig; the formulas are in membership/rules.py)."""

    # seconds. One member probed per interval, round robin. Detection time grows with it,
    # probe traffic falls with it.
    probe_interval_s: float = 1.0
    # seconds. Wait this long for a direct ack before asking others to probe.
    probe_timeout_s: float = 0.5
    # count. Members asked to probe indirectly when a direct probe fails.
    indirect_checks: int = 3
    # multiplier. Suspicion lasts suspicion_mult * max(1, log10 N) * probe interval at least
    # (more members, slower spread of the refutation)...
    suspicion_mult: int = 4
    # multiplier. ... and at most this many times that, shrinking as independent members
    # confirm the suspicion (Lifeguard).
    suspicion_max_mult: int = 6
    # multiplier. An update is gossiped retransmit_mult * ceil(log10(N + 1)) times.
    retransmit_mult: int = 4
    # seconds. A gossip round: send pending updates to gossip_nodes random members.
    gossip_interval_s: float = 0.2
    gossip_nodes: int = 3
    # count. Most updates piggybacked on one message.
    gossip_max_items: int = 64
    # seconds. Full state exchange with a random member, repairing what gossip missed.
    push_pull_interval_s: float = 30.0
    # count. Lifeguard's local health score ceiling: probe timeouts scale by (score + 1).
    awareness_max: int = 8
    # seconds. Gossip also goes to members declared dead this recently, so that one wrongly
    # declared dead (a partition that healed) hears it and refutes.
    gossip_to_dead_s: float = 30.0
    # seconds. Dead and left members are remembered this long (so stale gossip cannot revive
    # them), then forgotten.
    tombstone_s: float = 600.0
    # seconds. A joiner retries its seeds this long before giving up.
    join_timeout_s: float = 30.0
    # seconds. A joiner asks its seeds again after this long without an answer.
    join_retry_s: float = 1.0
    # seconds. A joiner syncs state with a seed once more this long after joining: members
    # that joined at about the same time were announced while its own join was in flight.
    sync_after_join_s: float = 2.0
    # seconds. How often tombstones older than tombstone_s are forgotten.
    tombstone_sweep_s: float = 60.0
    # seconds. A leaving peer (or one told to stop) waits this long after sending its
    # goodbyes and replies before it closes its connections, so that they reach the wire.
    leave_linger_s: float = 0.2


@dataclass(frozen=True)
class FaultToleranceConfig:
    """Recovery from lost peers (satin-fault-tolerance-malleability-migration §3)."""

    # Orphan saving: results whose owner is gone are kept, announced by gossip and reused by
    # the recomputation. False is the papers' naive mode: recompute everything, send no tuples
    # (for comparison).
    orphans: bool = True
    # count. Results a peer keeps for others (orphans and handed-over results); past it the
    # oldest go (a lost tuple only costs recomputation).
    keep_results: int = 100_000
    # count. Orphan tuples per message when a (re)started run's table is sent to every member
    # with its announce (bounded so that a big table never nears net.max_frame_bytes).
    tuples_per_message: int = 2_000
    # seconds. A run whose master has been gone this long in this peer's view and that nobody
    # took over is taken over by the peer the election names, even though it learnt of the
    # death before it knew the run well enough to respawn it (a restarted peer, a run known
    # only from a stolen job). The election itself happens at the death; this is its second
    # chance. Not at once: a peer that was paused (SIGSTOP) resumes believing everybody else
    # dead until their refutations arrive, and must not take runs over in the meantime.
    takeover_grace_s: float = 10.0


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


@dataclass(frozen=True)
class IterativeConfig:
    """Iterative master-worker runs on volatile workers (satind/iterative.py, core/iterative.py;
    scheduling-iterative-apps-volatile-resources, docs/volatile.md)."""

    # Which heuristic places the tasks: emct, emct*, mct, mct*, ud, ud*, lw, lw*, random,
    # random1..4, random1w..4w (satind/volatile/heuristics.py). EMCT did best in the paper.
    heuristic: str = "emct"
    # transfers. Tasks the master sends at once (the paper's n_com = BW / bw): a task's
    # transfer lasts until the worker acknowledges it.
    n_com: int = 4
    # seconds. The scheduler's time slot: it samples every worker's state (UP, RECLAIMED,
    # DOWN) once per slot to learn its availability, and places tasks.
    slot_s: float = 0.05
    # copies. Extra copies of a task at most, given to idle workers when UP workers outnumber
    # the tasks left (§6.1); the first to finish cancels the others. 0: none.
    replicas: int = 2
    # slots. How long a master watches a worker before `satind status` shows its estimated
    # availability (before that the estimate is mostly its prior, about 50%).
    shown_after_slots: int = 100


@dataclass(frozen=True)
class SpmdConfig:
    """Reconfigurable iterative SPMD runs (satind/spmd.py, core/spmd.py;
    mpi-ios-reconfigurable-iterative-apps, docs/spmd.md)."""

    # Migrate entities when the gain pays (IOS); off: they stay where they were placed (the
    # paper's static MPICH2 runs, for comparison). Drains and crashes move them regardless.
    migrate: bool = True
    # iterations. Every this many, each entity's registered state goes to the master and from
    # there to every member (the barrier a crash or a new master resumes from).
    checkpoint_every: int = 20
    # Γ above this migrates (the paper: above 0). A margin, so that measurement noise between
    # equal machines does not move entities back and forth.
    min_gain: float = 0.15
    # seconds. The fixed part of a migration's estimated cost M (messages, a pause at the
    # barrier); the rest is the registered state's bytes over ``bandwidth_bytes_s``.
    migration_latency_s: float = 0.05
    # bytes per second assumed between members when estimating M.
    bandwidth_bytes_s: float = 50e6
    # The base of Γ's logarithm (the paper does not say; natural by default).
    log_base: float = 2.718281828459045
    # seconds. How often a peer samples its CPUs' load (/proc/stat), the resource profile an
    # idle peer sends with its steal requests.
    profile_s: float = 1.0
    # seconds. A holder proposes one entity to one thief at a time: it waits this long for
    # the move before proposing to that thief again.
    propose_wait_s: float = 1.0
    # seconds. A holder does not propose entities to a peer it received one from this
    # recently: measurements are noisy (a CPU shared with other threads and processes), and
    # without it two equal peers pass entities back and forth near the balance.
    settle_s: float = 10.0
    # seconds. A step waiting this long for a neighbour's ghost asks the neighbour's holder
    # for it again (then every as long): a ghost can be lost with a peer an entity left.
    ghost_wait_s: float = 1.0
    # seconds. A move whose end the master has not heard of in this time counts as lost
    # (the run rolls back to its last checkpoint instead of waiting for ever).
    move_timeout_s: float = 30.0


@dataclass(frozen=True)
class CheckpointConfig:
    """Checkpoint logs of finished results (recovery/checkpoint.py), for runs that must
    survive the loss of every peer, and for suspend/resume."""

    # Directory of the per-peer logs: a local disk, or a mount every machine shares so that a
    # run can resume anywhere. Empty: no checkpoints.
    dir: str = ""
    # seconds between checkpoints (each a batch of appended records, fsynced).
    interval_s: float = 10.0
    # What is logged: "orphans" (Satin's lightweight checkpoint), at each interval the
    # results recovery needs (results of stolen jobs, kept orphans); "tic" (KAAPI's
    # theft-induced checkpointing), the same plus, at each interval and at every theft from
    # this peer, the finished children of its open frames (its part of the computation's
    # state); "sel" (systematic event logging), every finished job's result: the most reuse
    # after a total loss, the most bytes.
    policy: CheckpointPolicy = "orphans"
    # fsync each batch: a record counts as checkpointed once its batch is on the disk. Off,
    # a machine crash (not a process crash) may lose the last batches.
    fsync: bool = True
    # seconds a "tic" checkpoint waits for the compute side's snapshot (it answers at its
    # next sync; a long leaf delays it). Past it, the snapshot goes with the next batch.
    snapshot_wait_s: float = 1.0


@dataclass(frozen=True)
class RunConfig:
    """The run lifecycle on the master."""

    # seconds. After the root finishes the master gathers run statistics from every member;
    # a member that does not answer within this is left out of the sums.
    stats_timeout_s: float = 2.0
    # seconds. How often the launcher polls the master for progress on a terminal (the
    # console refreshes at least twice a second).
    progress_poll_s: float = 0.25
    # count. Runs one master runs at once; later submissions wait in its queue. Concurrent runs
    # share the peers' queues and compute threads, so more of them only interleave.
    max_concurrent: int = 4
    # count. Finished runs whose results a master keeps for `satind result`; when full, fetched
    # results are dropped first, then the oldest.
    keep_results: int = 100
    # seconds. A result is kept at most this long.
    keep_results_s: float = 24 * 3600.0
    # count. Other members that keep a copy of each finished run's result (within the same
    # bounds), so that `satind result` from any peer still answers after the master was
    # drained or crashed. The copies are chosen per run, so they spread over the members.
    result_copies: int = 2
    # seconds. A peer asked for a result it does not hold, whose master is gone (or that it
    # never heard of), asks every member for a copy and waits this long for their answers.
    copy_lookup_s: float = 2.0
    # count. Lines of a run's output (print, logging inside jobs) a peer keeps until it sends
    # them, and the master keeps per run (the newest); past it lines are dropped and counted.
    log_lines: int = 1000
    # characters. A longer line of output is cut.
    log_line_chars: int = 1000
    # seconds. How often a peer sends the output of jobs to their runs' masters.
    log_flush_s: float = 0.5
    # seconds. After a run's result, how long ``satind run`` and ``logs --follow`` wait for
    # the last lines (peers send them as soon as they hear of the end).
    log_tail_s: float = 0.2
    # count. Every this many custody checks (steal.custody_check_s), a peer asks the master
    # of each run of another master it still tracks whether the run is over: every notice of
    # its end may have been lost (30 s with the defaults).
    stale_check_rounds: int = 6
    # seconds. A submission's parse (the plugin's own code, in a thread of its own) that has
    # not returned within this is refused, saying so. Below client.timeout_s (30 s), so that
    # the client hears why instead of timing out. A parse that reads a pipe or loops forever
    # cannot be stopped (Python cannot kill a thread): it runs on, holding one of its
    # client's parses_per_client slots, and nothing else. Raise it for plugins that build
    # large inputs in parse (DIMACS files of millions of clauses take seconds).
    parse_timeout_s: float = 20.0
    # count. Parses of one client certificate a peer runs at once; more wait for a slot
    # (within parse_timeout_s). So one client's stuck or slow parses cost its own
    # submissions only, and parsing memory is bounded per client (at most this many
    # parses, each of at most files.max_input_bytes of input). Parses take milliseconds, so
    # 2 rarely makes anyone wait.
    parses_per_client: int = 2


@dataclass(frozen=True)
class FilesConfig:
    """Files a run's arguments name (satind/files.py). A run's arguments come from a client,
    so by default a peer opens no path they name: a plugin's input file travels from the
    client with the submission, and its output files travel back with the result, written
    by the client where it runs. An operator may let the peers read one directory and write
    into another instead."""

    # A directory the peers may read input files from: an argument names a file in it,
    # relative to it or absolute inside it. Confined: no "..", no symlink (even one that
    # points inside: copy or hard-link the file), regular files only, at most
    # max_input_bytes. A file it does not hold is asked of the client. Empty (the default):
    # peers read no file a client names.
    input_dir: str = ""
    # A directory where a run's master writes the run's output files, in a directory per run
    # (OUTPUT_DIR/RUN_ID/, under each file's base name), instead of sending them to the
    # submitter with the result. Empty (the default): outputs go to the submitter.
    output_dir: str = ""
    # bytes. The largest input file. It travels in the submission (one frame, at most
    # net.max_frame_bytes) and a plugin's parse turns it into objects several times its
    # size: 16 MiB of DIMACS is about a million clauses. The client refuses a larger file
    # before sending it, naming this setting.
    max_input_bytes: int = 16 * 1024 * 1024
    # bytes. A run's output files together. They travel in the run's result (one frame with
    # the value) and are kept with it (run.keep_results, run.result_copies): a report that
    # makes more fails, naming this setting.
    max_output_bytes: int = 16 * 1024 * 1024


@dataclass(frozen=True)
class AdaptConfig:
    """Self-adaptivity (satin-grid-programming-model §4.5): a coordinator on each run's
    master measures how efficiently the peers work and grows or shrinks the set of peers."""

    # Off by default: the coordinator drains machines and starts the provisioning command,
    # which an operator should ask for. The measurements are made either way.
    enabled: bool = False
    # seconds. How often the coordinator samples every peer and decides. The paper measured
    # over periods of minutes (10 min: 6% overhead); it costs here one small request per peer.
    period_s: float = 60.0
    # fraction. Above this weighted average efficiency the coordinator asks for more peers
    # (the paper's E_max = 50%: below it more peers do not help).
    e_max: float = 0.5
    # fraction. Below this it drains the least efficient peers (the paper's E_min = 30%).
    e_min: float = 0.3
    # fraction of the period. A cluster whose peers wait on wide-area steals more than this on
    # average is drained whole: its uplink is the bottleneck. The paper gives no value.
    cluster_overhead_max: float = 0.3
    # periods. A drain (of peers or of a cluster) is carried out only when this many periods
    # in a row called for one: a divide-and-conquer run's last stretch, when work runs out,
    # looks inefficient for a period and is no reason to move work. Adding acts at once.
    confirm_periods: int = 2
    # fraction. No drain once the run is this far done (the share of its tree finished, from
    # job ids): at the end of a divide-and-conquer run everyone runs out of work, which is no
    # reason to move what is left. 1.0: drain whenever the efficiency says so.
    shrink_until: float = 0.8
    # count. Never drain below this many working peers.
    min_peers: int = 1
    # count. Never ask for peers past this many working ones (0: no limit). A provisioning
    # command is asked again every period the efficiency stays above e_max.
    max_peers: int = 0
    # count. At most this many peers asked for, or drained, in one period (the paper adds
    # and removes gradually).
    max_change: int = 8
    # loop turns. The reference work each peer times every period to know its machine's
    # speed (adaptivity/measure.py; ~3 ms of CPU): the paper's benchmark, run as a plain
    # Python loop and timed in CPU time, so that waiting for the GIL does not count.
    benchmark_loops: int = 50_000
    # A command run when more peers are wanted than standby peers can give: its arguments,
    # then the number of peers wanted (also in SATIND_PEERS_WANTED). Empty: standby only.
    provision_command: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class PluginsConfig:
    """Loading plugin modules (``--plugin-path`` files and entry points; satind/vetting.py)."""

    # seconds. A plugin module is imported first in a short-lived process of its own: one
    # whose import has not ended within this long (a loop, a hung download) is not loaded,
    # and the process is killed. Each such module costs this much once per load (start,
    # reload, a peer restart), so it must stay well below launcher.start_timeout_s. Importing
    # satind and numpy takes about a second on a slow machine; a plugin that needs more at
    # import should compute lazily, on its first job.
    import_timeout_s: float = 10.0
    # seconds. The vetting process itself (an interpreter and satind's own modules, under a
    # second on an idle machine) must be ready to import within this. Apart from
    # import_timeout_s: a loaded machine is slow to start processes, and a plugin must not
    # be refused for that.
    vetter_start_timeout_s: float = 30.0


@dataclass(frozen=True)
class LauncherConfig:
    """`satind run`: local peers started as child processes."""

    # seconds. A peer that has not reported its port within this is a start-up failure.
    start_timeout_s: float = 30.0
    # seconds. After asking peers to stop, wait this long before SIGKILL.
    stop_grace_s: float = 5.0
    # seconds. Closing a peer's control pipe (the stop signal; ops/launcher.py) gives up
    # after this long. The name is from when that pipe was the peer's stdin.
    stdin_close_s: float = 0.5


@dataclass(frozen=True)
class DaemonConfig:
    """`satind start`: this machine's peers."""

    # The machine's name: its node certificate's name and the prefix of its peers' names
    # (NAME/0, NAME/1, ...). Empty: the host name.
    name: str = ""
    # Where peer i listens: port + i on host. 7420 is unassigned at IANA.
    host: str = "127.0.0.1"
    port: int = 7420
    # "HOST:PORT" of any peer of the system to join through; empty for the first machine.
    seeds: list[str] = field(default_factory=list)
    cluster: str = "c0"
    # count. Peers on this machine; 0 means one per core.
    peers: int = 0
    # Directory with ca.pem and NAME.pem/NAME.key (see `satind keys`).
    keys: str = ""
    plugin_paths: list[str] = field(default_factory=list)
    # Restart a peer process that exits unexpectedly (not one that was stopped or drained).
    restart: bool = True
    # seconds. Wait before restarting a crashed peer (doubles on repeated crashes, up to 60 s).
    restart_delay_s: float = 1.0
    # seconds. The longest wait before restarting a peer that keeps crashing.
    restart_max_delay_s: float = 60.0
    # seconds. A peer that ran this long before it crashed was working, not crash-looping:
    # its next restart waits restart_delay_s again. The back-off is for a peer that dies as it
    # starts (a bad plugin, no memory); one killed now and then must come back at once, or
    # its runs wait (the delays of a doubling back-off that never reset reached a minute).
    restart_stable_s: float = 5.0
    # What SIGTERM does: "leave" (announce leaving and exit at once) or "drain" (finish the work
    # first, then leave).
    on_sigterm: OnSigterm = "leave"
    # This machine's peers join as standby: members that take no work until a coordinator
    # ([adapt] enabled on the run's master) or an operator (`satind release`) admits them.
    standby: bool = False


@dataclass(frozen=True)
class ClientConfig:
    """Defaults for client commands (overridden by --to/--keys, then SATIND_TO/SATIND_KEYS)."""

    to: str = "127.0.0.1:7420"
    keys: str = ""
    # The client certificate's name in the keys directory (`satind keys init` makes "client").
    name: str = "client"
    # seconds. How long a client command waits for an answer (not for a run: --wait waits).
    timeout_s: float = 30.0
    # seconds. `satind suspend` waits this long: the master relays it, and every peer
    # flushes its checkpoint log first.
    suspend_timeout_s: float = 60.0
    # seconds. `satind resume` waits this long for the answer: the peer loads every log of
    # the checkpoint directory first, which takes a while for a big one.
    resume_timeout_s: float = 300.0
    # seconds. `satind status --watch` asks for the status this often.
    watch_interval_s: float = 0.5
    # count. Addresses of other members a peer gives a client with a run it accepted: if
    # that peer is lost, a waiting client (`submit --wait`, `satind run`) asks them instead.
    contacts: int = 8
    # seconds. How long a client that lost its peer keeps looking for the run when no
    # contact knows it (a daemon restarting the peer, a member still joining); a contact that
    # knows the run holds the wait for as long as the run takes.
    follow_s: float = 120.0
    # seconds. First and largest pause between rounds of asking the contacts (doubling).
    follow_retry_min_s: float = 0.25
    follow_retry_max_s: float = 5.0


@dataclass(frozen=True)
class EmulationConfig:
    """Wide-area emulation for experiments on one machine: applied by the transport to traffic
    between peers of different clusters. This is an emulation, not a network model: it delays
    each frame by the latency and paces each connection to the bandwidth. 0 turns it off."""

    # milliseconds, one way.
    latency_ms: float = 0.0
    # megabytes per second per connection.
    bandwidth_mbps: float = 0.0


@dataclass(frozen=True)
class MetricsConfig:
    """A Prometheus text endpoint per peer (node/metrics.py): `GET /metrics`."""

    # Serve it. Off by default: an open port is the operator's choice, not ours.
    enabled: bool = False
    # The address it binds. Loopback by default: the counters tell who runs what, and the
    # endpoint has no TLS; a scraper on another machine needs this set (or a local proxy).
    host: str = "127.0.0.1"
    # Peer i of a machine serves on port + i, as peers listen on daemon.port + i; 0 gives
    # each peer any free port (for tests; the daemon logs the addresses). 9420 mirrors
    # 7420 in the range Prometheus exporters use.
    port: int = 9420
    # bytes. A request head (request line and headers) longer than this closes the
    # connection unanswered; a scraper sends a few hundred.
    max_request_bytes: int = 8192
    # seconds. The request must arrive within this, and the answer be taken within this:
    # a client that stalls costs a task and a socket for this long at most.
    timeout_s: float = 5.0
    # count. Connections served at once; past it, new ones are closed at once. A Prometheus
    # server scrapes with one; a few spare serve a curl beside it.
    max_connections: int = 8


@dataclass(frozen=True)
class TraceConfig:
    """What each peer records of its runs for `satind run/submit --trace` (satind/trace.py)."""

    # events. A peer keeps the newest this many events per run (jobs without a local parent,
    # sync waits, steals, recovery). One run's events from one peer travel in one reply: at
    # about 12 CBOR items per event, 10,000 stay well inside net.max_items (and a few MB).
    max_events: int = 10_000
    # runs. Traces of this many runs are kept per peer (the oldest go): a run's trace can be
    # fetched after it ended, and the memory stays bounded (a few MB per run at most).
    keep_runs: int = 8
    # seconds. A blocking wait of a sync shorter than this is not recorded: short waits are
    # many, and they would push the spans that matter out of the ring.
    min_wait_s: float = 0.0005
    # seconds. Failed steals less than this apart make one "N failed steals" span: an idle
    # peer fails a steal every few milliseconds.
    streak_gap_s: float = 0.05


@dataclass(frozen=True)
class Config:
    engine: EngineConfig = field(default_factory=EngineConfig)
    steal: StealConfig = field(default_factory=StealConfig)
    net: NetConfig = field(default_factory=NetConfig)
    membership: MembershipConfig = field(default_factory=MembershipConfig)
    ft: FaultToleranceConfig = field(default_factory=FaultToleranceConfig)
    shared: SharedConfig = field(default_factory=SharedConfig)
    iterative: IterativeConfig = field(default_factory=IterativeConfig)
    spmd: SpmdConfig = field(default_factory=SpmdConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    run: RunConfig = field(default_factory=RunConfig)
    files: FilesConfig = field(default_factory=FilesConfig)
    adapt: AdaptConfig = field(default_factory=AdaptConfig)
    plugins: PluginsConfig = field(default_factory=PluginsConfig)
    launcher: LauncherConfig = field(default_factory=LauncherConfig)
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
    client: ClientConfig = field(default_factory=ClientConfig)
    emulation: EmulationConfig = field(default_factory=EmulationConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    trace: TraceConfig = field(default_factory=TraceConfig)


DEFAULT = Config()


def default_peer_count() -> int:
    """One peer per core: a peer has one compute thread, and the GIL serialises more."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


class ConfigError(ValueError):
    """A config file or override names an unknown setting or gives a value of the wrong type."""


# Settings whose values come from a fixed set.
CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("steal", "algorithm"): ("rs", "crs"),
    ("daemon", "on_sigterm"): ("leave", "drain"),
    ("checkpoint", "policy"): ("orphans", "tic", "sel"),
    ("iterative", "heuristic"): HEURISTICS,
}


def with_overrides(cfg: Config, overrides: dict[str, Any]) -> Config:
    """Return ``cfg`` with ``{"section": {"name": value}}`` overrides applied, type-checked.

    Raises:
        ConfigError: an unknown section or setting, or a value of the wrong type.
    """
    changes: dict[str, Any] = {}
    for section_name, values in overrides.items():
        if not hasattr(cfg, section_name):
            known = ", ".join(f.name for f in dataclasses.fields(cfg))
            raise ConfigError(f"unknown config section [{section_name}]; known: {known}")
        section = getattr(cfg, section_name)
        if not isinstance(values, dict):
            raise ConfigError(f"[{section_name}] must be a table of settings")
        fields = {f.name: f for f in dataclasses.fields(section)}
        for name, value in values.items():
            if name not in fields:
                raise ConfigError(
                    f"unknown setting {section_name}.{name}; known: {', '.join(fields)}"
                )
            current = getattr(section, name)
            ok = isinstance(value, type(current)) or (
                isinstance(current, float) and isinstance(value, int)
            )
            if isinstance(current, list):
                ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
            if not ok or isinstance(value, bool) != isinstance(current, bool):
                kind = "a list of strings" if isinstance(current, list) else type(current).__name__
                raise ConfigError(f"{section_name}.{name} must be {kind}, got {value!r}")
            allowed = CHOICES.get((section_name, name))
            if allowed is not None and value not in allowed:
                raise ConfigError(
                    f"{section_name}.{name} must be one of {', '.join(allowed)}, got {value!r}"
                )
            if isinstance(current, float):
                values = {**values, name: float(value)}
        changes[section_name] = dataclasses.replace(section, **values)
    return dataclasses.replace(cfg, **changes)


def apply_flags(cfg: Config, flags: dict[str, dict[str, Any]]) -> Config:
    """Command-line flags over a configuration: ``{"section": {"setting": value}}``, None
    meaning "not given". The one place where flags meet the configuration, checked as a
    config file's settings are.

    Raises:
        ConfigError: a flag's value is of the wrong type or not among the allowed choices.
    """
    given = {
        section: {name: value for name, value in values.items() if value is not None}
        for section, values in flags.items()
    }
    return with_overrides(cfg, {section: values for section, values in given.items() if values})


def load(path: Path | None, base: Config = DEFAULT) -> Config:
    """Load a TOML config file over ``base``.

    Raises:
        ConfigError: the file cannot be read or parsed, or names unknown settings.
    """
    if path is None:
        return base
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from exc
    try:
        return with_overrides(base, data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def to_toml(cfg: Config) -> str:
    """The effective configuration as TOML (for `satind config show`)."""
    lines: list[str] = []
    for section in dataclasses.fields(cfg):
        values = getattr(cfg, section.name)
        lines.append(f"[{section.name}]")
        for item in dataclasses.fields(values):
            lines.append(f"{item.name} = {_toml_value(getattr(values, item.name))}")
        lines.append("")
    return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value)  # strings and lists of strings: JSON syntax is valid TOML here


def for_peer(cfg: Config, index: int) -> Config:
    """The configuration of a machine's peer ``index``: it serves metrics on port + index
    (port 0: any free port, for each peer)."""
    port = cfg.metrics.port
    if not cfg.metrics.enabled or port == 0:
        return cfg
    return dataclasses.replace(cfg, metrics=dataclasses.replace(cfg.metrics, port=port + index))
