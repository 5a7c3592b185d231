"""Settings of runs: recovery, shared and iterative and SPMD runs, checkpoints, the run
lifecycle on the master, files, self-adaptivity and traces.

A section of satind's configuration (satind/config/__init__.py says how the sections are
grouped): each field's default is the only place that default lives, with its unit and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

CheckpointPolicy = Literal["orphans", "tic", "sel"]


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
    # seconds. Orphan tuples kept within this long are announced together, one message per
    # member (node/announce.py; the paper's combining, §3.6).
    tuple_combine_s: float = 0.05
    # seconds. A run whose master has been gone this long in this peer's view and that nobody
    # took over is taken over by the peer the election names, even though it learnt of the
    # death before it knew the run well enough to respawn it (a restarted peer, a run known
    # only from a stolen job). The election itself happens at the death; this is its second
    # chance. Not at once: a peer that was paused (SIGSTOP) resumes believing everybody else
    # dead until their refutations arrive, and must not take runs over in the meantime.
    takeover_grace_s: float = 10.0
    # seconds. The same for a run whose master was replaced by a newer instance of its slot
    # (a restarted peer): that death is certain, and the wait is only for news of a takeover
    # made before the new instance appeared, which the run's first news here may predate.
    replaced_grace_s: float = 1.0


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
    # bytes/s. A run's shipped code (its program) travels to a worker that lacks it before
    # that worker can compute (the paper's T_prog: a worker back from DOWN lacks it again).
    # Its transfer is the code's bytes over the bandwidth measured from the worker (large
    # frames: net.bandwidth_sample_bytes); this stands in until one is. Installed plugins:
    # no transfer.
    bandwidth_bytes_s: float = 50e6


@dataclass(frozen=True)
class SpmdConfig:
    """Reconfigurable iterative SPMD runs (satind/spmd.py, core/spmd/;
    mpi-ios-reconfigurable-iterative-apps, docs/spmd.md)."""

    # Migrate entities when the gain pays (IOS); off: they stay where they were placed (the
    # paper's static MPICH2 runs, for comparison). Drains and crashes move them regardless.
    migrate: bool = True
    # iterations. Every this many, each entity's registered state goes to the master and from
    # there to every member (the barrier a crash or a new master resumes from).
    checkpoint_every: int = 20
    # iterations. An entity's holder steps it this many iterations on its own (each step as
    # soon as its neighbours' ghosts are in) between two pushes from the master; pushes also
    # end at each checkpoint and at the run's end. More: less control traffic and no
    # barrier per iteration; fewer: moves wait less (a move happens between two pushes).
    push_every: int = 10
    # Γ above this migrates (the paper: above 0). A margin, so that measurement noise between
    # equal machines does not move entities back and forth.
    min_gain: float = 0.15
    # seconds. The fixed part of a migration's estimated cost M (messages, a pause at the
    # barrier); the rest is the registered state's bytes over ``bandwidth_bytes_s``.
    migration_latency_s: float = 0.05
    # bytes per second between members where none was measured yet (large frames from a
    # member measure it: net.bandwidth_sample_bytes), for M and the network term of Γ.
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
    # What is logged (finished results only, every policy; the pending tasks a crash lost are
    # spawned again by their ancestors): "orphans" (Satin's lightweight checkpoint), at each
    # interval the results recovery needs (results of stolen jobs, kept orphans); "tic" (after
    # KAAPI's theft-induced checkpointing), the same plus, at each interval and at every theft
    # from this peer, the finished children of its open frames; "sel" (systematic event
    # logging), every finished job's result as it finishes (a batch per write: a crash loses
    # the jobs in flight and the batch being written), the most bytes and a cost per task.
    policy: CheckpointPolicy = "orphans"
    # fsync each batch: a record counts as checkpointed once its batch is on the disk. Off,
    # a machine crash (not a process crash) may lose the last batches.
    fsync: bool = True
    # seconds a "tic" checkpoint waits for the compute side's snapshot (it answers at its
    # next sync; a long leaf delays it). Past it, the snapshot goes with the next batch.
    snapshot_wait_s: float = 1.0
    # count. Members that keep a copy of this peer's log (sent as it is written, on other
    # machines when there are any), so that when this peer is lost the survivors reuse what
    # it logged without a shared directory. 0: no copies (a shared mount already lets every
    # peer read every log: there, copies only cost network bytes).
    copies: int = 1
    # bytes. A log larger than this is not sent whole to a new keeper (the connection's outbox,
    # net.max_outbox_bytes, must keep room for steals and results): it gets what is appended
    # from then on.
    max_copy_bytes: int = 32 * 1024 * 1024
    # records. An iterative or SPMD run's barrier goes to the log at every barrier (a resume
    # starts from the newest); once this many older ones of a run lie in the log, the log is
    # rewritten without them (a barrier may be a whole SPMD grid: barriers must not pile
    # up with the iterations).
    superseded_barriers_max: int = 4
    # seconds. A survivor about to restart the jobs a lost member took first reads what that
    # member logged (core/logged.py); it restarts them without it after this long.
    read_wait_s: float = 5.0


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
    # A command run for each peer the coordinator drained, once it is gone (it handed its
    # work and results over and left): its arguments, then the peer's slot and host (also
    # in SATIND_RELEASED_SLOT and SATIND_RELEASED_HOST), to give the machine back to the
    # batch system or cloud it came from. Empty: the machine's daemon keeps it, idle.
    release_command: list[str] = field(default_factory=list)


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
class HistoryConfig:
    """The run history (node/history.py): every run a peer mastered or kept a result copy
    of, in an SQLite file per machine that outlives the peers, for `satind runs`, and for
    `satind result` and `satind logs` after a restart."""

    # Record it. Only `satind start` does: the embedded default's peers (`satind run`) are
    # gone with their command, and so would be their file.
    enabled: bool = True
    # The SQLite file. Empty: $XDG_STATE_HOME/satind/history-NAME.sqlite (~/.local/state
    # when XDG_STATE_HOME is unset), NAME being the machine's name, so two daemons on one
    # machine keep two files. The peers of one machine share it (SQLite's write-ahead log).
    path: str = ""
    # count. Runs kept; past it, the oldest ended go first.
    keep_runs: int = 10_000
    # seconds. A run is kept this long after it ended (30 days).
    keep_s: float = 30 * 24 * 3600.0
    # bytes. A result (its value, report and output files, as CBOR) up to this size is kept
    # in the database; a larger one in a file of its own beside it (results/RUN_ID.cbor),
    # which the row names with its size and SHA-256 (the database stays small to scan).
    max_result_bytes: int = 256 * 1024
    # count. The newest lines of a run's output kept with it.
    log_lines: int = 200
    # seconds. A master records a run this long after it ended, so that the last lines of
    # its output (peers flush them every run.log_flush_s) are in the record.
    record_delay_s: float = 1.0
    # count. Writes waiting for the database; past it, records are dropped, and logged (a
    # disk that stalls must not hold a peer's memory).
    max_pending: int = 1000
    # seconds. A writer waits this long for another peer of the machine to finish writing.
    busy_timeout_s: float = 5.0
