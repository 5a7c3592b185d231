"""Simulation scenarios: TOML files describing peers, network, workload and faults.

name = "two sites, one crashes"
seed = 1
duration_s = 600              # virtual time limit

[peers]
clusters = { c0 = 8, c1 = 8 } # peers per cluster (named c0/0, c0/1, ... c1/0, ...)
bootstrap = "join"            # or "converged": start as a system that has been up
speeds = { c1 = 0.5 }         # hardware speed per cluster (default 1.0; > 0), for every peer
                              # of the cluster, joiners too: a leaf takes cost / speed
standby = { c1 = 4 }          # the last 4 peers of c1 start standby: no work until a
                              # coordinator ([config] adapt) admits them

[network]
latency_ms = 0.5              # one way, inside a cluster
wide_latency_ms = 20.0        # one way, between clusters
jitter_ms = 0.0               # extra random delay (reorders messages)
drop = 0.0                    # probability per message
duplicate = 0.0

[workload]                    # a synthetic tree (satind/sim/workload.py); omit for none
depth = 6
branching = 4
leaf_ms = 50.0
dist = "exp"                  # fixed, uniform or exp
imbalance = 0.3
needles = 0.0                 # > 0: a search that aborts at the first needle (workload.py)
steps = 0                     # > 0: iterative, steps guarded by a shared clock (workload.py)
tail_ms = 0.0                 # iterative: the root's work after the last step (workload.py)
submit_at = 5.0               # virtual seconds after the start
steal = "crs"                 # rs or crs

[[runs]]                      # more runs besides the workload's, of installed plugins: each
plugin = "heat2d"             # submitted by the client at virtual time `at` to the peer `to`
argv = ["40", "40", "20", "4"] # (its master); each must end and pass the plugin's own check
to = "c0/1"
at = 5.0

[config]                      # overrides of satind's configuration, as in a config file
membership = { probe_interval_s = 0.5 }

[[faults]]                    # at virtual time `at`, one action:
at = 30.0
crash = ["c1/2", "c1/3"]      # peers by name, or a whole cluster: crash_cluster = "c1"
# restart = ["c0/0"] with delay = 1.0 (each peer crashes and, `delay` seconds later, a new
# process starts in its slot at its address, as a daemon restarting it: a new instance that
# knows nothing of the old one's work) |
# drain = ["c0/4"] (deadline = 0: they leave at once, cutting their work) |
# join = 4 (join_cluster = "c0") | drop = 0.1 |
# partition = [["c0"], ["c1"]] with duration = 10.0 (clusters or peer names) |
# pause = ["c0/0"] with duration = 20.0 (the peers neither send nor receive for that long;
# what they would have sent and received waits and flows when they resume, as TCP holds the
# traffic of a process stopped by SIGSTOP or a suspended laptop) |
# crash_all = true (a total loss) | damage_logs = 3 (every checkpoint log cut at a random
# offset in its second half, then 3 random bits flipped) | resume = true (the client asks the
# first live peer to resume the run from the checkpoint logs) |
# load = ["c0/3"] or load_cluster = "c1" with share = 0.3 (background load: from then on
# those peers, the ones there now, get that fraction of a CPU, 0 < share <= 1, and a leaf
# takes cost / (speed * share); share = 1.0 lifts the load) |
# bandwidth_cluster = "c1" with bytes_per_s = 100000 (from then on every wide-area message
# between peers into or out of c1 is serialized through c1's uplink, a queue each way, then
# takes the wide latency; bytes_per_s = inf lifts the limit)

Checkpoints: a non-empty ``[config] checkpoint.dir`` turns them on; in the simulator the
"directory" is one in-memory store shared by every peer, old and new (a shared mount); with
``checkpoint.dir = "local"`` each peer slot has a store of its own (a machine's disk): a
survivor then reads a lost peer's log only from a copy (``checkpoint.copies``).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from satind.config import Config, ConfigError, with_overrides
from satind.sim.workload import DISTRIBUTIONS, Workload


class ScenarioError(ValueError):
    """A scenario file is wrong; the message names the key and what is allowed."""


@dataclass(frozen=True)
class Fault:
    at: float
    # crash, crash_all, restart (duration: the delay before the new instance), drain, join,
    # drop, partition, pause, damage_logs, resume, load (value: the share), bandwidth
    # (cluster; value: bytes per second, inf for no limit)
    kind: str
    peers: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()
    count: int = 0
    cluster: str = ""
    value: float = 0.0
    sides: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    duration: float = 0.0


@dataclass(frozen=True)
class RunSpec:
    """A run of an installed plugin the simulated client submits besides the workload's."""

    plugin: str
    argv: tuple[str, ...]
    to: str
    at: float


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: int
    duration_s: float
    clusters: dict[str, int]
    # Hardware speed factor per cluster (absent: 1.0), for every peer of it, joiners too.
    speeds: dict[str, float] = field(default_factory=dict)
    # Peers per cluster that start standby (the last ones of the cluster): members that take
    # no work until a coordinator admits them (node/adapt.py).
    standby: dict[str, int] = field(default_factory=dict)
    # "join": every peer joins through the first one at the start (the join storm);
    # "converged": every peer starts knowing every other, as in a system that has been up.
    bootstrap: str = "join"
    latency_s: float = 0.0005
    wide_latency_s: float = 0.0005
    jitter_s: float = 0.0
    drop: float = 0.0
    duplicate: float = 0.0
    workload: Workload | None = None
    submit_at: float = 5.0
    steal: str = "crs"
    config: Config = field(default_factory=Config)
    faults: tuple[Fault, ...] = ()
    runs: tuple[RunSpec, ...] = ()

    @property
    def peer_count(self) -> int:
        return sum(self.clusters.values())


_TOP = {"name", "seed", "duration_s", "peers", "network", "workload", "runs", "config", "faults"}
_FAULT_KINDS = (
    "crash",
    "crash_cluster",
    "crash_all",
    "restart",
    "drain",
    "join",
    "drop",
    "partition",
    "pause",
    "damage_logs",
    "resume",
    "load",
    "load_cluster",
    "bandwidth_cluster",
)
# Keys a fault kind takes besides `at` and its own.
_FAULT_EXTRA = {
    "restart": {"delay"},
    "drain": {"deadline"},
    "load": {"share"},
    "load_cluster": {"share"},
    "bandwidth_cluster": {"bytes_per_s"},
}


def _get(table: dict[str, Any], key: str, kind: type, default: Any, where: str) -> Any:
    value = table.get(key, default)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ScenarioError(f"{where}.{key} must be {kind.__name__}, got {value!r}")
    return value


def _known(table: dict[str, Any], keys: set[str], where: str) -> None:
    unknown = set(table) - keys
    if unknown:
        names = ", ".join(sorted(unknown))
        raise ScenarioError(f"unknown key(s) {names} in {where}; known: {', '.join(sorted(keys))}")


def parse(data: dict[str, Any], base: Config | None = None) -> Scenario:
    """Validate a scenario table.

    Raises:
        ScenarioError: what is wrong and what is allowed.
    """
    _known(data, _TOP, "the scenario")
    peers = data.get("peers", {})
    _known(peers, {"clusters", "bootstrap", "speeds", "standby"}, "[peers]")
    bootstrap = _get(peers, "bootstrap", str, "join", "peers")
    if bootstrap not in ("join", "converged"):
        raise ScenarioError("peers.bootstrap must be join (gossip from one seed) or converged")
    clusters = peers.get("clusters")
    if (
        not isinstance(clusters, dict)
        or not clusters
        or not all(isinstance(v, int) and v > 0 for v in clusters.values())
    ):
        raise ScenarioError("[peers] clusters must be a table of cluster = peer count (> 0)")
    speeds = _speeds(peers.get("speeds", {}), set(clusters))
    standby = peers.get("standby", {})
    if not isinstance(standby, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in standby.values()
    ):
        raise ScenarioError("[peers] standby must be a table of cluster = standby peer count")
    for cluster, count in standby.items():
        if cluster not in clusters or count > clusters[cluster]:
            raise ScenarioError(
                f"peers.standby: cluster {cluster!r} must be in [peers] clusters with at least "
                f"{count} peers (standby peers are the last peers of their cluster)"
            )
    net = data.get("network", {})
    _known(net, {"latency_ms", "wide_latency_ms", "jitter_ms", "drop", "duplicate"}, "[network]")
    workload = None
    wl = data.get("workload")
    submit_at, steal = 5.0, "crs"
    if wl is not None:
        _known(
            wl,
            {
                "depth",
                "branching",
                "leaf_ms",
                "dist",
                "imbalance",
                "needles",
                "steps",
                "tail_ms",
                "submit_at",
                "steal",
            },
            "[workload]",
        )
        dist = _get(wl, "dist", str, "fixed", "workload")
        if dist not in DISTRIBUTIONS:
            raise ScenarioError(f"workload.dist must be one of {', '.join(DISTRIBUTIONS)}")
        workload = Workload(
            depth=_get(wl, "depth", int, 4, "workload"),
            branching=_get(wl, "branching", int, 4, "workload"),
            leaf_ms=_get(wl, "leaf_ms", float, 10.0, "workload"),
            dist=dist,
            imbalance=_get(wl, "imbalance", float, 0.0, "workload"),
            needles=_get(wl, "needles", float, 0.0, "workload"),
            steps=_get(wl, "steps", int, 0, "workload"),
            tail_ms=_get(wl, "tail_ms", float, 0.0, "workload"),
        )
        submit_at = _get(wl, "submit_at", float, 5.0, "workload")
        steal = _get(wl, "steal", str, "crs", "workload")
        if steal not in ("rs", "crs"):
            raise ScenarioError("workload.steal must be rs or crs")
    try:
        config = with_overrides(base or Config(), data.get("config", {}))
    except ConfigError as exc:
        raise ScenarioError(f"[config]: {exc}") from None
    faults = tuple(_fault(f, i, set(clusters)) for i, f in enumerate(data.get("faults", [])))
    runs = data.get("runs", [])
    if not isinstance(runs, list):
        raise ScenarioError("runs must be an array of tables ([[runs]])")
    return Scenario(
        name=_get(data, "name", str, "unnamed", "the scenario"),
        seed=_get(data, "seed", int, 1, "the scenario"),
        duration_s=_get(data, "duration_s", float, 600.0, "the scenario"),
        clusters={str(k): int(v) for k, v in clusters.items()},
        speeds=speeds,
        standby={str(k): int(v) for k, v in standby.items()},
        bootstrap=bootstrap,
        latency_s=_get(net, "latency_ms", float, 0.5, "network") / 1000,
        wide_latency_s=_get(net, "wide_latency_ms", float, 0.5, "network") / 1000,
        jitter_s=_get(net, "jitter_ms", float, 0.0, "network") / 1000,
        drop=_get(net, "drop", float, 0.0, "network"),
        duplicate=_get(net, "duplicate", float, 0.0, "network"),
        workload=workload,
        submit_at=submit_at,
        steal=steal,
        config=config,
        faults=tuple(sorted(faults, key=lambda f: f.at)),
        runs=tuple(_run(r, i) for i, r in enumerate(runs)),
    )


def _run(raw: Any, index: int) -> RunSpec:
    where = f"runs[{index}]"
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where} must be a table")
    _known(raw, {"plugin", "argv", "to", "at"}, where)
    from satind.plugin import discover

    plugin = _get(raw, "plugin", str, "", where)
    known = discover()
    if plugin not in known:
        raise ScenarioError(
            f"{where}.plugin: no plugin {plugin!r} is installed; there are "
            f"{', '.join(sorted(known))}"
        )
    argv = raw.get("argv", [])
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        raise ScenarioError(f"{where}.argv must be a list of strings (the plugin's arguments)")
    to = _get(raw, "to", str, "", where)
    if "/" not in to:
        raise ScenarioError(f"{where}.to must name a peer (CLUSTER/INDEX), got {to!r}")
    return RunSpec(plugin, tuple(argv), to, _get(raw, "at", float, 5.0, where))


def _fault(raw: Any, index: int, clusters: set[str]) -> Fault:
    where = f"faults[{index}]"
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where} must be a table")
    kinds = [k for k in _FAULT_KINDS if k in raw]
    if len(kinds) != 1:
        raise ScenarioError(f"{where} needs exactly one of {', '.join(_FAULT_KINDS)}")
    kind = kinds[0]
    extra = _FAULT_EXTRA.get(kind, {"duration", "join_cluster"})
    _known(raw, {"at", kind} | extra, where)
    at = _get(raw, "at", float, 0.0, where)
    value = raw[kind]
    if kind in ("load", "load_cluster"):
        if "share" not in raw:
            raise ScenarioError(f"{where}.share is missing (the fraction of a CPU, 0 < share <= 1)")
        share = _get(raw, "share", float, 1.0, where)
        if not 0.0 < share <= 1.0:
            raise ScenarioError(f"{where}.share must be in (0, 1], got {share!r}")
        if kind == "load_cluster":
            if value not in clusters:
                raise ScenarioError(f"{where}.load_cluster: no cluster {value!r}")
            return Fault(at, "load", clusters=(value,), value=share)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ScenarioError(f"{where}.load must be a list of peer names")
        return Fault(at, "load", peers=tuple(value), value=share)
    if kind == "bandwidth_cluster":
        if value not in clusters:
            raise ScenarioError(f"{where}.bandwidth_cluster: no cluster {value!r}")
        if "bytes_per_s" not in raw:
            raise ScenarioError(f"{where}.bytes_per_s is missing (the uplink's bandwidth, > 0)")
        rate = _get(raw, "bytes_per_s", float, 0.0, where)
        if not rate > 0:
            raise ScenarioError(f"{where}.bytes_per_s must be > 0 (inf: no limit), got {rate!r}")
        return Fault(at, "bandwidth", cluster=value, value=rate)
    if kind == "restart":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ScenarioError(f"{where}.restart must be a list of peer names")
        delay = _get(raw, "delay", float, 1.0, where)
        if not 0.0 <= delay < math.inf:
            raise ScenarioError(f"{where}.delay must be >= 0 seconds, got {delay!r}")
        return Fault(at, kind, peers=tuple(value), duration=delay)
    if kind in ("crash", "drain", "pause"):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ScenarioError(f"{where}.{kind} must be a list of peer names")
        if kind == "drain":
            # seconds before the drained peers cut what is left and leave (`drain --deadline`)
            deadline = _get(raw, "deadline", float, -1.0, where)
            return Fault(at, kind, peers=tuple(value), value=deadline)
        return Fault(
            at, kind, peers=tuple(value), duration=_get(raw, "duration", float, 10.0, where)
        )
    if kind == "crash_cluster":
        if value not in clusters:
            raise ScenarioError(f"{where}.crash_cluster: no cluster {value!r}")
        return Fault(at, "crash", clusters=(value,))
    if kind == "crash_all" or kind == "resume":
        if value is not True:
            raise ScenarioError(f"{where}.{kind} must be true")
        return Fault(at, kind)
    if kind == "damage_logs":
        return Fault(at, kind, count=_get(raw, kind, int, 0, where))
    if kind == "join":
        cluster = _get(raw, "join_cluster", str, sorted(clusters)[0], where)
        return Fault(at, kind, count=_get(raw, "join", int, 1, where), cluster=cluster)
    if kind == "drop":
        return Fault(at, kind, value=_get(raw, "drop", float, 0.0, where))
    sides = value
    if not (
        isinstance(sides, list) and len(sides) == 2 and all(isinstance(s, list) for s in sides)
    ):
        raise ScenarioError(f"{where}.partition must be [[names...], [names...]]")
    return Fault(
        at,
        kind,
        sides=(tuple(sides[0]), tuple(sides[1])),
        duration=_get(raw, "duration", float, 10.0, where),
    )


def _speeds(raw: Any, clusters: set[str]) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise ScenarioError("[peers] speeds must be a table of cluster = speed factor (> 0)")
    speeds: dict[str, float] = {}
    for cluster in raw:
        if cluster not in clusters:
            raise ScenarioError(f"peers.speeds: no cluster {cluster!r}")
        value = _get(raw, cluster, float, 1.0, "peers.speeds")
        if not 0.0 < value < math.inf:
            raise ScenarioError(f"peers.speeds.{cluster} must be > 0 and finite, got {value!r}")
        speeds[str(cluster)] = value
    return speeds


def load(path: Path) -> Scenario:
    """Raises ScenarioError."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ScenarioError(f"cannot read scenario {path}: {exc}") from None
    try:
        return parse(data)
    except ScenarioError as exc:
        raise ScenarioError(f"{path}: {exc}") from None
