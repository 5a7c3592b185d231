"""Settings of the processes around the peers: plugin loading, `satind run`'s launcher,
`satind start`'s daemon, clients and the metrics endpoint.

A section of satind's configuration (satind/config/__init__.py says how the sections are
grouped): each field's default is the only place that default lives, with its unit and why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

OnSigterm = Literal["leave", "drain"]


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
    # MiB. The address space a vetting process may take (RLIMIT_AS): a module whose import
    # allocates past it fails with MemoryError and is not loaded, instead of the vetting
    # holding gigabytes of the machine's memory (one shipped module's import held 5 GiB).
    # Address space, not resident memory: an interpreter with satind and NumPy maps about
    # 0.5 GiB, a CUDA build of a deep-learning library several. Never above the process's
    # own hard limit (`ulimit -v`). 0: no bound.
    vet_memory_mb: int = 4096
    # Shipped code (plugin/shipped.py): plugin directories clients send with a submission.
    # Off by default: shipping runs the client's code on every peer that takes part. On, it
    # is still taken only from client certificates with the "ship" grant (docs/operations.md).
    accept_shipped: bool = False
    # Where a peer keeps the versions it was sent, a directory each; "" (the default): a
    # private temporary directory per peer process, removed when it stops.
    shipped_dir: str = ""
    # bytes. The most Python one shipped version may hold (its files together), and files.
    max_shipped_bytes: int = 8 * 1024 * 1024
    max_shipped_files: int = 256
    # count. Versions kept when no run uses them (the least recently used go first): a run
    # submitted again with the same code does not send or vet it again.
    shipped_keep: int = 8
    # count. A member fetching a run's shipped code asks the members that have it in turn,
    # this many rounds (fetch_pause_s apart) before it gives up and takes no part in the
    # run: one answer slow on a loaded machine must not cost the run a member.
    fetch_rounds: int = 3
    # seconds. Between two rounds of fetching shipped code.
    fetch_pause_s: float = 1.0


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
    # Fork peers from a template process that has imported satind (ops/forker.py): a peer
    # starts in milliseconds, not in the ~0.7 s of CPU its imports take. Linux only; false,
    # or elsewhere: each peer is a new interpreter.
    fork_peers: bool = True


@dataclass(frozen=True)
class DaemonConfig:
    """`satind start`: this machine's peers."""

    # The machine's name: its node certificate's name and the prefix of its peers' names
    # (NAME/0, NAME/1, ...). Empty: the host name.
    name: str = ""
    # Where peer i listens: port + i on host. 7420 is unassigned at IANA.
    host: str = "127.0.0.1"
    port: int = 7420
    # The address the peers give the other members: "HOST" (peer i advertises the port it
    # listens on) or "HOST:PORT" (peer i advertises PORT + i: a port mapped by NAT or a
    # container runtime). Empty: the listening address, or, when the peers listen on every
    # interface (0.0.0.0, ::), the address of the interface that reaches the seeds
    # (ops/advertise.py says how it is found).
    advertise: str = ""
    # "HOST:PORT" of any peer of the system to join through; empty for the first machine.
    seeds: list[str] = field(default_factory=list)
    # Where the machine keeps what outlives its peers: the members they last saw alive, which
    # a restarted peer rejoins through (node/remember.py). Empty: $XDG_STATE_HOME/satind
    # (~/.local/state/satind), where the run history is kept by default too.
    state_dir: str = ""
    # Remember the members (above). Off: a restarted machine without seeds finds the system
    # only when the others dial it (membership/rejoin.py).
    remember_members: bool = True
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
    # seconds. A drain (SIGTERM with on_sigterm = "drain", `satind drain`, `satind stop
    # --drain`, unless they give --deadline) finishes what the peer holds for at most this
    # long; then it leaves as the paper's leaving processor does (core/drain.cut): its
    # unfinished work is cut, what it finished goes to the owners, who restart the rest. For a
    # machine that gets a termination notice, set it under the notice (a preemptible cloud
    # machine's 30-120 s, a Kubernetes pod's grace period) less a few seconds.
    drain_deadline_s: float = 600.0
    # seconds. After the deadline, how long the compute side has to unwind (it cuts a frame at
    # its next spawn or sync: a long leaf delays it) before the peer leaves regardless; what
    # was not unwound by then is restarted by its owners without reuse.
    cut_grace_s: float = 1.0
    # This machine's peers join as standby: members that take no work until a coordinator
    # ([adapt] enabled on the run's master) or an operator (`satind release`) admits them.
    standby: bool = False


@dataclass(frozen=True)
class OwnerConfig:
    """`satind start`: reclaim this machine's peers automatically while its owner uses it
    (ops/owner.py), as desktop grids do: the Casanova et al. model's RECLAIMED state, detected
    from the load other processes put on the machine instead of declared by hand."""

    # Off by default: on a dedicated machine other load is not an owner, and a reclaimed
    # peer computes nothing.
    reclaim: bool = False
    # fraction of the CPUs the daemon may use. Other processes (anything but this daemon and
    # its peers) keeping more than this busy is the owner at work.
    reclaim_above: float = 0.5
    # seconds. ... for this long in a row before the peers are reclaimed (a compile or a
    # page load is not a reclaim).
    reclaim_after_s: float = 10.0
    # fraction. Other load under this ...
    release_below: float = 0.25
    # seconds. ... for this long in a row releases them: longer than reclaim_after_s, since
    # an owner who paused often comes back (the paper's reclaimed stretches last minutes).
    release_after_s: float = 30.0
    # seconds. How often the daemon reads /proc/stat and its peers' CPU time.
    sample_s: float = 1.0


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
    # seconds. The request head must arrive within this of the connection's start, each
    # connection on its own clock (node/http.py): a scraper sends it at once, and a client
    # that trickles bytes holds a slot this long at most, not as long as it likes.
    head_timeout_s: float = 3.0
    # seconds. The answer must be taken within this: a client that stops reading costs a
    # task and a socket for this long at most.
    timeout_s: float = 5.0
    # count. Connections served at once. Past it, a new one closes the oldest that has not
    # sent its request head yet (slow clients cannot starve a scrape), or is closed itself
    # when every one is being answered. A Prometheus server scrapes with one; a few spare
    # serve a curl beside it.
    max_connections: int = 8


@dataclass(frozen=True)
class DashboardConfig:
    """A web dashboard per peer (node/dashboard.py): the peers, the runs, a run's page, live."""

    # Serve it. Off by default: an open port is the operator's choice.
    enabled: bool = False
    # The address it binds. Loopback by default; another address needs tls or a token.
    host: str = "127.0.0.1"
    # Peer i of a machine serves on port + i (0: any free port; the log says which).
    port: int = 8420
    # Serve over TLS with the peer's own certificate, and ask for a client certificate of the
    # cluster (a browser then needs the client's key imported). Off on loopback by default.
    tls: bool = False
    # A secret a browser must present (``?token=`` once, then a cookie). Empty: none. Bound to
    # anything but loopback, the dashboard refuses to start without tls or a token.
    token: str = ""
    # Host names a browser may reach it by, besides IP addresses and "localhost" (a name an
    # operator gave the machine, a tunnel's). A request naming another host is refused: a web
    # page the browser opened elsewhere could otherwise rebind its own name to 127.0.0.1 and
    # read this dashboard from its own origin (DNS rebinding).
    allowed_hosts: list[str] = field(default_factory=list)
    # seconds. The live page gets a new snapshot this often.
    refresh_s: float = 1.0
    # count. Connections served at once (each live page holds one for its event stream).
    # Past it, a new one closes the oldest that has not sent its request head yet, so that
    # clients that connect and send nothing cannot starve the page; when every one is being
    # answered, the new one is closed. 64 is a few dozen open pages, a task and a socket each.
    max_connections: int = 64
    # bytes. A request head longer than this closes the connection unanswered.
    max_request_bytes: int = 8192
    # seconds. The request head (and the TLS handshake before it) must arrive within this
    # of the connection's start, each connection on its own clock: a browser sends it at
    # once; a client that sends a byte a second is closed after this, not after 8 KiB.
    head_timeout_s: float = 3.0
    # seconds. Each answer (each event of the live stream) must be taken within this: a page
    # that stops reading is dropped after this, its stream no longer filling the peer's memory.
    timeout_s: float = 5.0
    # seconds. The main page's task stream shows the last this many seconds of the running
    # runs' jobs, steals and recovery events (each peer's trace: satind/trace.py).
    stream_s: float = 60.0
    # count. The most events a task stream carries to the browser (the newest): a page of
    # 16 peers' last minute stays a few hundred kilobytes.
    stream_events: int = 4000
    # seconds. Each peer's CPU, queue and memory over the last this many seconds, as the
    # snapshots saw them (one point per snapshot): the peers' sparklines.
    history_s: float = 300.0


def default_peer_count() -> int:
    """One peer per core: a peer has one compute thread, and the GIL serialises more."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
