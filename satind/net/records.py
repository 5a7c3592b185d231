"""The records nested in messages (frozen dataclasses without a type code of their own):
what a run is, a stolen job, gossip about a member, an orphan tuple, status lines. Field types
are restricted to what codec.py validates."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ErrorInfo:
    """An exception that crossed the wire: its type name, message and formatted traceback,
    and, for an exception of a type registered with ``satind.register_type``, the exception
    itself as an application value (``codec.encode_value``), rebuilt as itself on arrival."""

    type: str
    message: str
    traceback: str = ""
    value: bytes | None = None
    # Its ``args`` as an application value, when they travel (plain data): a class with a
    # constructor of its own is rebuilt as ``cls(*args)`` where it is known, not
    # ``cls(message)`` (which failed, or made another exception).
    args: bytes | None = None


@dataclass(frozen=True)
class RunInfo:
    """What every peer knows of a run: enough to run its jobs and to respawn its root."""

    run_id: str
    plugin: str
    code_hash: str
    argv: list[str]
    # CBOR of the root's arguments (the plugin's parse result), so no peer has to parse.
    args: bytes
    master: str
    # The plugin's maximum branching factor for these arguments (progress from job ids).
    branching: int = 2
    epoch: int = 0
    # Whether the master runs the plugin's check on the result (`satind run --no-check`).
    check: bool = True
    # The root's function when it is not the plugin's entry (a run submitted as a function
    # with Python values): its registry name, "module:qualname", in the plugin's module.
    entry: str = ""
    # The name of the client certificate that submitted it: a client with the "submit" grant
    # may cancel and read its own runs only (node/permissions.py). "" before owners existed.
    owner: str = ""
    # Its plugin's code was shipped with it (plugin/shipped.py): a member that lacks this
    # version fetches it from the master (CodeRequest) instead of refusing the run.
    shipped: bool = False
    # When the run first started (or was resumed), by its master's wall clock (seconds since
    # the epoch); None before. A master that takes the run over (election, hand-over)
    # counts its elapsed time from here, not from its own start.
    started_at: float | None = None
    # Its share of thieves' steals beside other runs (``Submit.weight``).
    weight: float = 1.0


@dataclass(frozen=True)
class JobSpec:
    """A stolen job: which function, with which arguments, at which place in which run."""

    run_id: str
    plugin: str
    code_hash: str
    master: str
    branching: int
    path: bytes
    fn: str
    args: bytes
    # The run's epoch at the victim: a stolen job of a new master's epoch tells the thief.
    epoch: int = 0
    # Ids of the shared objects its arguments refer to (satind/shared.py): a thief without a
    # replica of one fetches it from the victim before the job runs.
    shared: list[str] = field(default_factory=list)
    # A task of an iterative run, pushed by its master (core/iterative.py): never stolen on.
    pushed: bool = False
    # Its run's code was shipped (RunInfo.shipped): a thief without it fetches it first.
    shipped: bool = False


@dataclass(frozen=True)
class EntityTask:
    """What a holder's core needs to know of a pushed entity job of an SPMD run
    (core/spmd/): which entity, which phase (0 place, 1 step, 2 collect), the iteration
    and generation (a rollback to a checkpoint starts a new one), the run's length, and
    where the entity's neighbours are (the master's locator when it pushed)."""

    entity: int
    phase: int
    iteration: int
    gen: int
    iterations: int
    neighbours: list[int] = field(default_factory=list)
    holders: list[str] = field(default_factory=list)
    # A step whose iteration ends at a checkpoint: it returns its registered state.
    checkpoint: bool = False
    # A step job covers the iterations from ``iteration`` to ``until`` (excluded): the holder
    # steps the entity on its own between them, and the job's result comes after the last
    # (0: one step). ``checkpoint`` is about the last.
    until: int = 0


@dataclass(frozen=True)
class GhostData:
    """Data ``sender`` (an entity) computed for a neighbour at the end of an iteration: what
    the neighbour's step ``iteration`` reads (the ghost rows of heat2d)."""

    sender: int
    gen: int
    iteration: int
    data: bytes


@dataclass(frozen=True)
class SharedUpdate:
    """One global method call on a shared object: the ``seq``-th by ``sender`` on it."""

    shared_id: str
    sender: str
    seq: int
    method: str
    args: bytes
    # The object's incarnation: the epoch of the run when it was made. A new master's epoch
    # makes it again (same id, fresh state); calls on an older incarnation are ignored.
    incarnation: int = 0


@dataclass(frozen=True)
class ReplicaDigest:
    """What a peer has applied to its replica of a shared object: its incarnation and how many
    global calls of each sender (anti-entropy, engine/replication.py)."""

    shared_id: str
    incarnation: int
    seen: dict[str, int]


@dataclass(frozen=True)
class MemberUpdate:
    """Gossip about one member (membership/view.py applies it with SWIM's rules)."""

    name: str
    host: str
    port: int
    cluster: str
    state: str  # "alive", "suspect", "dead" or "left"
    incarnation: int
    # The member's process start time (ns): a restarted peer is a newer instance.
    instance: int
    draining: bool = False
    # Reclaimed by its machine's owner (`satind reclaim`): alive, computing nothing.
    reclaimed: bool = False
    # plugin name -> code hash; sent with "alive" updates.
    plugins: dict[str, str] = field(default_factory=dict)
    # For "suspect": who suspects (Lifeguard counts independent suspicions).
    origin: str = ""


@dataclass(frozen=True)
class OrphanTuple:
    """A finished result whose owner is gone, kept by ``holder`` (fault tolerance §3.2)."""

    run_id: str
    path: bytes
    holder: str


@dataclass(frozen=True)
class RunAnnounce:
    """A run's descriptor and where it stands, spread by gossip to every peer."""

    info: RunInfo
    state: str  # "queued", "running", "done", "failed", "suspended" or "cancelled"


@dataclass(frozen=True)
class Broadcasts:
    """What rides on gossip: piggybacked on probes, and sent in gossip rounds."""

    members: list[MemberUpdate] = field(default_factory=list)
    runs: list[RunAnnounce] = field(default_factory=list)
    tuples: list[OrphanTuple] = field(default_factory=list)


@dataclass(frozen=True)
class AdaptDecision:
    """One period's decision of a self-adaptivity coordinator (node/adapt.py), as a status
    line carries it: when (wall clock), for which run, over how many peers, the weighted
    average efficiency, what it did ("add 2", "drain m1/0", "drain cluster c1", "wait"), why."""

    at: float
    run_id: str
    peers: int
    efficiency: float
    action: str
    why: str


@dataclass(frozen=True)
class PeerStatus:
    """One peer's line in ``satind status``."""

    name: str
    cluster: str
    state: str  # alive, suspect, dead, left, draining or reclaimed
    queue: int = 0
    jobs_run: int = 0
    jobs_given: int = 0
    stolen_local: int = 0
    stolen_wide: int = 0
    steal_attempts_local: int = 0
    steal_attempts_wide: int = 0
    cpu_percent: float = 0.0
    rss_mb: float = 0.0
    runs: int = 0
    # Checkpoints (recovery/checkpoint.py): policy ("" when off), bytes written, seconds since
    # the last one (-1: none yet).
    checkpoint_policy: str = ""
    checkpoint_bytes: int = 0
    checkpoint_age_s: float = -1.0
    # Where clients reach it (`status --watch` moves to another peer when its own leaves).
    address: str = ""
    # The fraction of time it is UP as the answering peer's iterative scheduler estimates it
    # (core/iterative.py; -1: not known there).
    availability: float = -1.0
    # Entities of SPMD runs it holds (core/spmd/).
    entities: int = 0
    # The runs it takes no part in, and why ("RUN_ID: why"): a plugin's requirements it
    # lacks (plugin/requirements.py), another version of the plugin, shipped code it could
    # not get.
    not_serving: list[str] = field(default_factory=list)
    # The last decisions of its adaptivity coordinator (a run's master with [adapt] enabled).
    decisions: list[AdaptDecision] = field(default_factory=list)
    # Whether it joined the system: its join was answered, or it is the first member (False
    # while its seeds have not answered, and for good when they never did). A peer says it of
    # itself; a line made from another's member table says True, as a member is in a table
    # only once it reached someone (`satind ready`).
    joined: bool = True


@dataclass(frozen=True)
class RunStatus:
    """One run's line in ``satind status``."""

    run_id: str
    plugin: str
    argv: list[str]
    master: str
    state: str  # queued, running, done, failed, suspended, cancelled, checkpointed
    progress: float
    elapsed_s: float
    counters: dict[str, int | float] = field(default_factory=dict)
    # Running, and no member has begun any of its jobs yet (stats.waiting_for_peers): set
    # where the members' shares are summed (node/status.py merge_runs).
    waiting: bool = False


@dataclass(frozen=True)
class PluginInfo:
    """One plugin a member has (``satind plugins --to``)."""

    name: str
    code_hash: str
    source: str
    usage: str = ""
    description: str = ""
    # The requirements this member lacks (it takes no part in the plugin's runs), or "".
    unmet: str = ""


@dataclass(frozen=True)
class MemberPlugins:
    """A member's plugins; ``note``: what a reload changed there, or why it failed."""

    member: str
    plugins: list[PluginInfo]
    note: str = ""


@dataclass(frozen=True)
class TraceEvent:
    """One event of a run's trace on one peer (satind/trace.py): a span of ``dur`` seconds
    from ``at`` (the peer's ``time.time()``), or an instant when ``dur`` is -1."""

    track: str
    cat: str
    name: str
    at: float
    dur: float
    detail: str = ""


@dataclass(frozen=True)
class RunRecord:
    """A run as the run history keeps it (node/history.py): what `satind runs` lists. Times
    are wall-clock seconds since the Unix epoch; the result itself is fetched apart."""

    run_id: str
    plugin: str
    argv: list[str]
    code_hash: str
    # The client certificate that submitted it ("" when unknown).
    owner: str
    # Its masters, as "NAME@EPOCH", the first first (a run handed over or taken over has
    # several; each recorder knows those it saw).
    masters: list[str]
    state: str
    started_at: float
    ended_at: float
    elapsed_s: float
    # The plugin's check ("ok", "skipped", ...) and the error's first line ("" if none).
    check: str = ""
    error: str = ""
    stats: dict[str, int | float] = field(default_factory=dict)
    # The newest lines of its output (history.log_lines), and when each was written (seconds
    # since the epoch, by the clock of the peer that ran the job; 0.0: not known).
    log: list[str] = field(default_factory=list)
    log_times: list[float] = field(default_factory=list)
    # bytes. The size of its result as kept (CBOR); where, when not in the database.
    result_bytes: int = 0
    result_ref: str = ""
    # The slot of the peer that wrote this record (its master's, or a copy holder's).
    recorded_by: str = ""
