"""One trial of a paper's multi-machine experiment, on testbed machines or in the simulator
(benchmarks/testbed_experiments.py runs them).

A ``Trial`` says what is measured, the same way for both: machines m1..mN (one per cluster,
c0..c{N-1}: a cluster of the paper is a machine here), the peers of each, a machine that joins
half-way (migration), the fault and which cluster it hits, and the settings that differ from
the shipped defaults (naive mode, checkpoints, RS, the wide-area emulation, a throttled
uplink). ``on_testbed`` runs it on real daemons in network namespaces (satind/testbed/);
``in_simulator`` turns it into a scenario of the simulator (benchmarks/recovery.py's).

CPU: a machine of the testbed gets ``peers x cpu_per_peer`` CPUs through a CFS quota (cgroup
v1 ``cpu`` controller) when ``cpu_per_peer`` is set — for the raytracer, whose leaves compute:
without it every machine shares the host's two CPUs, and a cluster that leaves gives its CPU
to the survivors instead of taking it away. Sleeping leaves need none.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from satind.testbed import Machine, Testbed  # noqa: E402
from tests import references  # noqa: E402

CGROUP_CPU = Path("/sys/fs/cgroup/cpu")
# microseconds. The quota's period: short, so that a machine over its quota stops for a few
# milliseconds at a time, never for the 100 ms of the default period (a probe's ack waits).
PERIOD_US = 20_000
# seconds. Longest wait for a run's result (a trial that takes longer failed).
RESULT_LIMIT_S = 1200.0
# seconds. How long a trial's machines have to become one system before the run.
SETTLE_S = 120.0
# virtual seconds. When the simulated run is submitted (the peers start converged).
SIM_SUBMIT_AT = 2.0
# seconds. The simulated migration drains the leaving cluster this long after the joiners
# start (on the testbed: once they are seen alive, about as long).
SIM_DRAIN_AFTER_S = 3.0
# milliseconds one way inside a cluster in the simulator (the testbed's bridge and TLS).
SIM_LOCAL_MS = 0.1


@dataclass(frozen=True)
class Trial:
    """One variant of an experiment. ``fault``: "" (none), "crash" (SIGKILL of every process
    of the machine: daemon, peers, nothing restarts), "leave" (`satind drain --cluster
    --deadline 0`: the paper's graceful leave) or "migrate" (the joiner starts, then the
    target leaves); ``target``: the cluster index it hits (0 holds the run's master)."""

    group: str
    variant: str
    machines: tuple[int, ...]
    fault: str = ""
    target: int = 1
    joiner: int = 0
    orphans: bool = True
    checkpoint: str = ""
    steal: str = "crs"
    wide_ms: float = 0.0
    # bytes/s: the last machine's uplink, shared out over its links to the others (0: none).
    uplink_bps: int = 0

    def config(self) -> str:
        """The daemons' config file: only what differs from the shipped defaults."""
        text = ""
        if not self.orphans:
            text += "[ft]\norphans = false\n"
        if self.checkpoint:
            text += f'[checkpoint]\npolicy = "{self.checkpoint}"\n'
        if self.steal != "crs":
            text += f'[steal]\nalgorithm = "{self.steal}"\n'
        if self.wide_ms:
            text += f"[emulation]\nlatency_ms = {self.wide_ms:g}\n"
        return text


@dataclass(frozen=True)
class Workload:
    """What is submitted: the plugin's argv, the peers per paper processor (the raytracer
    runs half as many peers), the CPUs the machines of an experiment's fault-free layout get
    in all (0: no quotas; each peer gets an equal share, kept when peers leave or join), and
    the simulator's tree of its shape (depth, branching, mean leaf ms on a whole CPU,
    distribution)."""

    name: str
    argv: tuple[str, ...]
    scale: float
    cpu_budget: float
    sim_tree: tuple[int, int, float, str]

    def share(self, full: Trial) -> float:
        """Each peer's CPUs in the experiment whose fault-free trial is ``full`` (0: none)."""
        return self.cpu_budget / sum(layout(full, self)[0]) if self.cpu_budget else 0.0


@dataclass
class CpuLimits:
    """A CFS quota per machine: ``peers x share`` CPUs for every process in it (children
    forked later inherit the group). ``close`` removes the groups."""

    share: float
    root: Path = field(init=False)

    def __post_init__(self) -> None:
        self.root = CGROUP_CPU / f"satind-bench-{os.getpid()}-{time.monotonic_ns()}"
        try:
            self.root.mkdir()
        except OSError as exc:
            raise SystemExit(
                f"no CPU quotas here ({exc}): the testbed's raytracer needs the cgroup v1 cpu "
                "controller at /sys/fs/cgroup/cpu, or --cpu-per-peer 0 (every machine then "
                "shares the host's CPUs)"
            ) from exc

    def add(self, machine: Machine) -> None:
        group = self.root / machine.name
        group.mkdir(exist_ok=True)
        (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        quota = max(1000, round(machine.peers * self.share * PERIOD_US))
        (group / "cpu.cfs_quota_us").write_text(str(quota))
        for pid in machine.pids():
            with contextlib.suppress(OSError):  # gone meanwhile
                (group / "cgroup.procs").write_text(str(pid))

    def close(self) -> None:
        for group in [*self.root.iterdir(), self.root] if self.root.exists() else []:
            if group.is_dir():
                for _ in range(100):  # the killed processes leave their group as they end
                    try:
                        group.rmdir()
                        break
                    except OSError:
                        time.sleep(0.05)


class Answers:
    """Each answer checked against the reference (tests/references.py) once per argv: the
    raytracer's reference renders the whole image again, a minute of CPU."""

    def __init__(self) -> None:
        self.known: dict[tuple[str, ...], Any] = {}

    def check(self, argv: Sequence[str], result: Any) -> None:
        key = tuple(argv)
        if key in self.known:
            assert result == self.known[key], f"{argv}: {result!r} != {self.known[key]!r}"
            return
        references.verify(argv[0], argv[1:], result)
        self.known[key] = result


def layout(trial: Trial, workload: Workload) -> tuple[list[int], int]:
    """Peers of each machine (the paper's processors times the workload's scale) and of the
    joiner."""
    peers = [max(1, round(n * workload.scale)) for n in trial.machines]
    return peers, max(1, round(trial.joiner * workload.scale)) if trial.joiner else 0


def on_testbed(
    trial: Trial,
    workload: Workload,
    share: float,
    at: float | None,
    root: Path,
    answers: Answers,
) -> dict[str, Any]:
    """Run the trial on fresh testbed machines, each peer with ``share`` CPUs (0: no quota),
    the fault ``at`` seconds after the run was accepted; returns its record (``wall_s`` from
    the acceptance to the result at the submitter, ``fault_s`` when the fault was applied)."""
    peers, joiner = layout(trial, workload)
    names = [f"m{i + 1}" for i in range(len(peers) + (1 if joiner else 0))]
    extra: list[str] = []
    if trial.config():
        root.mkdir(parents=True, exist_ok=True)
        (root / "satind.toml").write_text(trial.config())
        extra = ["--config", str(root / "satind.toml")]
    bed = Testbed.up(
        len(names),
        root,
        peers=1,
        clusters=len(names),
        extra=extra,
        checkpoints=bool(trial.checkpoint),
        start=False,
    )
    limits = CpuLimits(share) if share else None
    record: dict[str, Any] = {"peers": sum(peers), "joiner": joiner}
    try:
        for name, count in zip(names, [*peers, joiner], strict=False):
            bed.machines[name].peers = count
        first = names[: len(peers)]
        _start(bed, first, limits)
        record["settle_s"] = round(bed.wait_one_system(SETTLE_S, machines=first), 2)
        if trial.uplink_bps:
            rate = trial.uplink_bps * 8 // (len(first) - 1)
            bed.throttle([first[-1]], first[:-1], rate)
        # The run's master is m1/0; a fault that hits m1 has the result awaited at m2.
        waiter = names[1] if trial.fault and trial.target == 0 else names[0]
        done = bed.satind("submit", *workload.argv, "--no-check", to=names[0])
        if done.returncode != 0:
            raise RuntimeError(f"submit: {done.stderr[-2000:]}")
        run_id = done.stdout.strip()
        started = time.monotonic()
        wait = _Waiter(["result", run_id, "--wait", "--json", *bed.client_args(waiter)])
        try:
            if trial.fault and at is not None:
                time.sleep(max(0.0, started + at - time.monotonic()))
                if wait.is_alive():
                    record["fault_s"] = round(time.monotonic() - started, 2)
                    record.update(_fault(bed, trial, names, waiter, limits))
            wait.join(RESULT_LIMIT_S)
        finally:
            wait.stop()
        record["wall_s"] = round(wait.done_at - started, 3)
        if wait.proc.returncode != 0:
            raise RuntimeError(f"result: {wait.err[-2000:]}")
        report = json.loads(wait.out)
        answers.check(workload.argv, report["result"])
        record.update(elapsed_s=report["elapsed_s"], stats=report["stats"], ok=True)
        return record
    finally:
        bed.down()
        if limits is not None:
            limits.close()


class _Waiter(threading.Thread):
    """A `satind` client that waits for the result, timed by when it ends (the fault's own
    steps, such as a migration's, may still be under way then)."""

    def __init__(self, argv: list[str]) -> None:
        super().__init__(daemon=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "satind", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out = self.err = ""
        self.done_at = math.inf
        self.start()

    def run(self) -> None:
        self.out, self.err = self.proc.communicate()
        self.done_at = time.monotonic()

    def stop(self) -> None:
        """Kill the client if it still waits (no answer in time, or the trial failed)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.join()


def _start(bed: Testbed, names: Sequence[str], limits: CpuLimits | None) -> None:
    """Start machines as README.md does (the first, whose address seeds the others, first)."""
    bed.start(names[0])
    for name in names[1:]:
        bed.start(name, wait=False)
    for name in names[1:]:
        bed.wait_started(name)
    if limits is not None:
        for name in names:
            limits.add(bed.machines[name])


def _fault(
    bed: Testbed, trial: Trial, names: list[str], waiter: str, limits: CpuLimits | None
) -> dict[str, Any]:
    began = time.monotonic()
    target = names[trial.target]
    if trial.fault == "crash":
        bed.crash(target)
        return {}
    if trial.fault == "migrate":
        _start(bed, names[-1:], limits)
        live = [n for n in names if n != target] + [target]
        bed.wait_one_system(SETTLE_S, machines=live)
    done = bed.satind(
        "drain", "--cluster", bed.machines[target].cluster, "--deadline", "0", to=waiter
    )
    if done.returncode != 0:
        raise RuntimeError(f"drain: {done.stderr[-2000:]}")
    return {"leave_after_s": round(time.monotonic() - began, 2)}


def in_simulator(
    trial: Trial, workload: Workload, share: float, at: float | None, seed: int
) -> Any:
    """The trial as a simulated run (the same machines as clusters, peers, faults and
    settings; the shipped membership; leaves of the workload's shape, on peers of ``share``
    CPUs); returns its SimReport. ``at``: virtual seconds after the submission."""
    from recovery import run  # benchmarks/ is the script's directory

    peers, joiner = layout(trial, workload)
    clusters = {f"c{i}": n for i, n in enumerate(peers)}
    depth, branching, leaf_ms, dist = workload.sim_tree
    # A leaf on a peer with a share of a CPU takes its whole-CPU time over the share (every
    # peer has the same share; the simulator's speeds would miss the joiners' new cluster).
    leaf_ms /= share or 1.0
    faults: list[dict[str, Any]] = []
    when = SIM_SUBMIT_AT + (at or 0.0)
    target = f"c{trial.target}"
    if trial.fault == "crash":
        faults.append({"at": when, "crash_cluster": target})
    elif trial.fault in ("leave", "migrate"):
        drained = [f"{target}/{i}" for i in range(clusters[target])]
        if trial.fault == "migrate":
            faults.append({"at": when, "join": joiner, "join_cluster": f"c{len(peers)}"})
            when += SIM_DRAIN_AFTER_S
        faults.append({"at": when, "drain": drained, "deadline": 0.0})
    if trial.uplink_bps:
        slow = f"c{len(peers) - 1}"
        faults.append({"at": 0.0, "bandwidth_cluster": slow, "bytes_per_s": trial.uplink_bps})
    config: dict[str, Any] = {"ft": {"orphans": trial.orphans}}
    if trial.checkpoint:
        # Each peer's own store, copies on members: the testbed's local directories.
        config["checkpoint"] = {"dir": "local", "policy": trial.checkpoint}
    spec = {
        "name": f"{trial.group}: {trial.variant}",
        "seed": seed,
        "duration_s": 3600.0,
        "peers": {"clusters": clusters, "bootstrap": "converged"},
        "network": {"latency_ms": SIM_LOCAL_MS, "wide_latency_ms": trial.wide_ms or SIM_LOCAL_MS},
        "workload": {
            "depth": depth,
            "branching": branching,
            "leaf_ms": leaf_ms,
            "dist": dist,
            "submit_at": SIM_SUBMIT_AT,
            "steal": trial.steal,
        },
        "config": config,
        "faults": faults,
    }
    return run(spec, range(seed, seed + 1))[0]
