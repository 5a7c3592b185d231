"""Every counter satind reports, once: its name, unit and meaning, and how counters combine.

A run's ``stats`` (the run JSON), ``satind status``, the console and the tests read counter
names from here. Every counter is a sum over peers: each peer counts its own share of a run
(the difference between its counters at the run's start and now, for counters that are not
per run: ``PER_RUN`` and ``STEALS`` are), and the master adds the shares up (``total``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

Group = Literal[
    "run",
    "steal",
    "traffic",
    "recovery",
    "checkpoint",
    "speculation",
    "sharing",
    "iterative",
    "spmd",
]


@dataclass(frozen=True)
class Stat:
    name: str
    unit: str
    group: Group
    what: str


STATS: tuple[Stat, ...] = (
    Stat("spawns", "jobs", "run", "jobs spawned"),
    Stat("syncs", "calls", "run", "sync() calls"),
    Stat("jobs_run", "jobs", "run", "jobs run to completion"),
    Stat(
        "jobs_entered", "jobs", "run", "jobs begun that came from elsewhere: root, stolen, pushed"
    ),
    Stat("leaves_run", "jobs", "run", "jobs that spawned nothing"),
    Stat("progress", "fraction", "run", "share of the run's tree finished (from job ids)"),
    # 1 in each peer's share that ran a job of the run: summed, the peers that computed for
    # it (a run's "peers" are those present at its end, which a crash or a join changes).
    Stat("peers_computed", "peers", "run", "peers that ran at least one of the run's jobs"),
    Stat(
        "busy_s",
        "seconds",
        "run",
        "time compute sides spent on the run's jobs, not waiting for work or stolen children",
    ),
    Stat("steal_attempts_local", "requests", "steal", "steal requests inside the cluster"),
    Stat("steal_attempts_wide", "requests", "steal", "steal requests to other clusters"),
    Stat("stolen_local", "jobs", "steal", "jobs stolen inside the cluster"),
    Stat("stolen_wide", "jobs", "steal", "jobs stolen from other clusters"),
    Stat("jobs_given", "jobs", "steal", "jobs other peers took from this one"),
    Stat(
        "idle_s",
        "seconds",
        "steal",
        "time the compute side wanted work while a run was active (stealing or waiting)",
    ),
    Stat("wide_wait_s", "seconds", "steal", "round trips of wide-area steal requests"),
    Stat("messages", "messages", "traffic", "messages sent"),
    Stat("bytes", "bytes", "traffic", "bytes sent"),
    Stat("messages_wide", "messages", "traffic", "messages sent to other clusters"),
    Stat("bytes_wide", "bytes", "traffic", "bytes sent to other clusters"),
    Stat("jobs_restarted", "jobs", "recovery", "jobs put back after their thief was lost"),
    Stat("tuples_sent", "tuples", "recovery", "orphan tuples announced"),
    Stat("tuples_received", "tuples", "recovery", "orphan tuples filed"),
    Stat("orphan_table_size", "tuples", "recovery", "entries in the orphan tables"),
    Stat("results_reused", "jobs", "recovery", "kept results used instead of computing"),
    Stat("results_kept", "results", "recovery", "results kept for others"),
    Stat(
        "results_from_logs",
        "results",
        "recovery",
        "results read from a lost member's checkpoint log instead of computed again",
    ),
    Stat("leaves_redone", "jobs", "recovery", "leaves computed again below restarted jobs"),
    Stat("aborts", "calls", "speculation", "abort() calls that cancelled children"),
    Stat("abort_messages", "messages", "speculation", "Abort messages sent to thieves"),
    Stat("jobs_cancelled", "jobs", "speculation", "jobs dropped unfinished by an abort"),
    Stat(
        "abort_wasted_s",
        "seconds",
        "speculation",
        "time spent on stolen jobs an abort then dropped",
    ),
    Stat("shared_updates_sent", "updates", "sharing", "global calls sent to other peers"),
    Stat("shared_updates_received", "updates", "sharing", "global calls received"),
    Stat("shared_update_messages", "messages", "sharing", "messages of combined global calls"),
    Stat("shared_update_bytes", "bytes", "sharing", "bytes of global calls sent"),
    Stat("guard_waits", "jobs", "sharing", "stolen jobs whose guard made them wait"),
    Stat(
        "results_waited",
        "results",
        "sharing",
        "results of stolen jobs that waited for their subtree's global calls",
    ),
    Stat("replica_fetches", "replicas", "sharing", "replicas asked of another peer"),
    Stat("shared_digests", "messages", "sharing", "anti-entropy digests sent"),
    Stat(
        "shared_updates_resent",
        "updates",
        "sharing",
        "global calls sent again in answer to a digest",
    ),
    Stat("tasks_pushed", "tasks", "iterative", "iterative tasks a master sent to workers"),
    Stat("task_replicas", "tasks", "iterative", "extra copies of iterative tasks sent"),
    Stat("tasks_requeued", "tasks", "iterative", "iterative tasks placed again (worker lost)"),
    Stat(
        "program_transfers",
        "workers",
        "iterative",
        "workers that fetched an iterative run's shipped code while its task waited",
    ),
    Stat("barriers", "barriers", "iterative", "iterations an iterative run's master finished"),
    Stat("entity_moves", "entities", "spmd", "SPMD entities migrated (gain, drain)"),
    Stat("ghosts_sent", "messages", "spmd", "ghost data sent to neighbour entities"),
    Stat("ghost_bytes", "bytes", "spmd", "bytes of ghost data sent"),
    Stat("migrations_proposed", "entities", "spmd", "entities a holder proposed to a thief"),
    Stat("rollbacks", "rollbacks", "spmd", "SPMD runs rolled back to a checkpoint (holder lost)"),
    Stat("checkpoint_bytes", "bytes", "checkpoint", "bytes appended to checkpoint logs"),
    Stat("checkpoint_records", "records", "checkpoint", "records appended to checkpoint logs"),
    Stat(
        "checkpoint_bytes_copied",
        "bytes",
        "checkpoint",
        "bytes of the log sent to members keeping a copy ([checkpoint] copies)",
    ),
)
BY_NAME: dict[str, Stat] = {s.name: s for s in STATS}

# What the run summary prints, in order (`satind run`, `submit --wait`, `result`).
SUMMARY: tuple[str, ...] = (
    "spawns",
    "syncs",
    "jobs_run",
    "steal_attempts_local",
    "steal_attempts_wide",
    "stolen_local",
    "stolen_wide",
    "messages",
    "bytes",
)
# Printed when a fault made any of them nonzero (satin-fault-tolerance §3).
RECOVERY: tuple[str, ...] = (
    "jobs_restarted",
    "tuples_sent",
    "tuples_received",
    "orphan_table_size",
    "results_reused",
    "results_from_logs",
    "leaves_redone",
)
# Printed when a run aborted anything (satin-grid-programming-model §3.3).
SPECULATION: tuple[str, ...] = ("aborts", "abort_messages", "jobs_cancelled", "abort_wasted_s")
# Printed for an iterative run (satind/iterative.py).
ITERATIVE: tuple[str, ...] = (
    "barriers",
    "tasks_pushed",
    "task_replicas",
    "tasks_requeued",
    "program_transfers",
)
# Printed for an SPMD run (satind/spmd.py).
SPMD: tuple[str, ...] = (
    "entity_moves",
    "migrations_proposed",
    "ghosts_sent",
    "ghost_bytes",
    "rollbacks",
)
# Printed when a run used shared objects (satin-grid-programming-model §3.2).
SHARING: tuple[str, ...] = (
    "shared_updates_sent",
    "shared_update_messages",
    "shared_update_bytes",
    "guard_waits",
    "results_waited",
    "replica_fetches",
    "shared_digests",
    "shared_updates_resent",
)
# Levels, not running totals: they go down as well as up (Prometheus gauges, node/metrics.py).
LEVELS: frozenset[str] = frozenset({"orphan_table_size", "progress"})
# Steals a peer counts per run as well as for itself (PeerRun.steals): a run's jobs it stole
# and gave away. Its steal attempts are the peer's growth while the run was known there (a
# thief with no sync waiting asks for any run's job).
Steal = Literal["stolen_local", "stolen_wide", "jobs_given"]
STEALS: tuple[Steal, ...] = ("stolen_local", "stolen_wide", "jobs_given")
# Counters kept by the run itself on each peer (engine.jobs.RunState); the others but STEALS
# are the peer's, and a run's share of them is their growth while the run was known there.
PER_RUN: frozenset[str] = frozenset(
    {
        "spawns",
        "syncs",
        "jobs_run",
        "jobs_entered",
        "leaves_run",
        "leaves_redone",
        "progress",
        "aborts",
        "jobs_cancelled",
        "abort_wasted_s",
        "busy_s",
    }
)


def waiting_for_peers(state: str, counters: Mapping[str, float]) -> bool:
    """Whether a run is waiting for peers: running, and no peer has begun any of its jobs
    yet (its root waits in a queue behind other runs' work), from the counters summed over
    the members. Said in the status, the watch, the dashboard and the Python API, so that a
    run no one works on does not pass for a slow one. (An iterative or SPMD run's master
    counts its iterations: it is under way once it has one.)"""
    return (
        state == "running"
        and not counters.get("jobs_entered", 0)
        and not counters.get("jobs_run", 0)
        and "iteration" not in counters
    )


def total(parts: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Counters of several peers (or shares), summed by name."""
    out: dict[str, float] = {}
    for part in parts:
        for key, value in part.items():
            out[key] = out.get(key, 0) + value
    return out


def delta(now: Mapping[str, float], baseline: Mapping[str, float]) -> dict[str, float]:
    """What counters grew by since ``baseline``."""
    return {key: value - baseline.get(key, 0) for key, value in now.items()}


def as_ints(stats: Mapping[str, float]) -> dict[str, int | float]:
    """Counters are sums of integers; send them as such (floats only where fractional)."""
    return {k: int(v) if float(v).is_integer() else v for k, v in stats.items()}


def efficiency(counters: Mapping[str, float], peers: int, elapsed_s: float) -> float | None:
    """The run's efficiency from the peers' own accounting: the time their compute sides
    spent on its jobs over the time they had (peers x elapsed), as Satin measures it (§4.5)
    and with no sequential run to compare with. None when it cannot be said (no peers, no
    time, or counters from a satind that did not keep ``busy_s``)."""
    busy = counters.get("busy_s")
    if busy is None or peers <= 0 or elapsed_s <= 0:
        return None
    return round(min(1.0, busy / (peers * elapsed_s)), 4)
