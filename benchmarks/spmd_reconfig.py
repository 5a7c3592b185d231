"""The shape of Figures 6 and 7 of mpi-ios-reconfigurable-iterative-apps on this machine:
heat2d with 8 entities on real `satind start` daemons while the load on their CPU rises and a
member joins on a free CPU, reconfigurable (entities migrate by gain) against static placement
(`[spmd] migrate = false`, the paper's MPICH2 run). Iterations per second over time and total
time, medians over --repeat runs of each, alternated.

The scenario, on 2 CPUs (the paper's, scaled down: it started with 8 processes on 4 of its 8
processors, loaded one node, and processors joined later):

* t = 0: members m1 and m2 (one peer each), both pinned to CPU 0 — half the machine;
* t = --load-at: a CPU hog on CPU 0 (the load on the computing node rises);
* t = --join-at: member m3 joins, pinned to CPU 1 (a free processor joins);
* t = --more-load-at: a second hog on CPU 0 (the load rises further).

    cd benchmarks && python spmd_reconfig.py --repeat 3

Prints the command, a markdown table, and writes docs/spmd-fig6-7.png.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from plotting import has_matplotlib  # the scripts' directory: python benchmarks/...
from recovery_procs import Machine, satind

DOCS = Path(__file__).resolve().parent.parent / "docs"

CONFIG = """
[membership]
probe_interval_s = 0.2
probe_timeout_s = 0.1
suspicion_mult = 3

[daemon]
restart = false

[spmd]
migrate = {migrate}
checkpoint_every = 10
"""

LINE = re.compile(
    r"^(\S+ \S+) m1/0 INFO satind\.core\.spmd(?:\.\w+)?: run \S+: iteration (\d+), entities"
)


def pin(pid: int, cpu: int) -> None:
    """Every thread of ``pid`` on ``cpu``."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(int(tid), {cpu})


def hog(cpu: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    os.sched_setaffinity(proc.pid, {cpu})
    return proc


def one_run(migrate: bool, argv: list[str], times: dict[str, float]) -> dict[str, Any]:
    """One run of the scenario: its total seconds and its (time, iteration) points."""
    cpus = sorted(os.sched_getaffinity(0))
    busy, free = cpus[0], cpus[1]
    with tempfile.TemporaryDirectory() as tmp:
        keys = Path(tmp)
        for args in (("init", tmp), *(("issue", tmp, f"m{i}") for i in (1, 2, 3))):
            assert satind("keys", *args).returncode == 0
        config = keys / "spmd.toml"
        config.write_text(CONFIG.format(migrate=str(migrate).lower()))
        machines: list[Machine] = []
        hogs: list[subprocess.Popen[bytes]] = []
        try:
            m1 = Machine(keys, "m1", 1, config, "")
            m2 = Machine(keys, "m2", 1, config, m1.first)
            machines += [m1, m2]
            for m in machines:
                pin(m.peers[0], busy)
            time.sleep(1.0)  # m2 is a member
            cmd = [sys.executable, "-m", "satind", "submit", *argv, "--no-check", "--wait"]
            cmd += ["--json", "--to", m1.first, "--keys", tmp]
            started, started_wall = time.monotonic(), time.time()
            wait = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            events = sorted((at, what) for what, at in times.items())
            for at, what in events:
                delay = started + at - time.monotonic()
                if delay > 0:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        wait.wait(timeout=delay)
                if wait.poll() is not None:
                    break
                if what == "join":
                    m3 = Machine(keys, "m3", 1, config, m1.first)
                    machines.append(m3)
                    pin(m3.peers[0], free)
                else:
                    hogs.append(hog(busy))
            out, err = wait.communicate(timeout=1800)
            assert wait.returncode == 0, err
            result = json.loads(out)
            points = []
            for line in m1.log.read_text().splitlines():
                found = LINE.match(line)
                if found:
                    stamp = time.mktime(time.strptime(found.group(1)[:19], "%Y-%m-%d %H:%M:%S"))
                    stamp += float("0." + found.group(1)[20:])
                    points.append((stamp, int(found.group(2))))
            return {
                "seconds": result["elapsed_s"],
                "moves": result["stats"].get("entity_moves", 0),
                "points": [(t - started_wall, i) for t, i in points],
            }
        finally:
            for h in hogs:
                h.kill()
                h.wait()
            for m in machines:
                m.stop()


def rates(points: list[tuple[float, int]]) -> tuple[list[float], list[float]]:
    """Iterations per second between consecutive logged checkpoints, against the seconds
    since the run was submitted."""
    xs, ys = [], []
    for (t1, i1), (t2, i2) in itertools.pairwise(points):
        if t2 > t1:
            xs.append((t1 + t2) / 2)
            ys.append((i2 - i1) / (t2 - t1))
    return xs, ys


def plot(runs: dict[str, dict[str, Any]], times: dict[str, float], path: Path) -> None:
    if not has_matplotlib():
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for label, run in runs.items():
        xs, ys = rates(run["points"])
        ax.plot(xs, ys, label=f"{label} ({run['seconds']:.1f} s)")
    for what, at in times.items():
        ax.axvline(at, color="grey", linestyle=":", linewidth=1)
        ax.text(at, ax.get_ylim()[1] * 0.97, what, rotation=90, va="top", fontsize=8)
    ax.set_xlabel("seconds since the run started")
    ax.set_ylabel("iterations per second")
    ax.set_title("heat2d, 8 entities: load rising on their CPU, a member joining on a free one")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rows", type=int, default=600)
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--load-at", type=float, default=5.0)
    parser.add_argument("--join-at", type=float, default=10.0)
    parser.add_argument("--more-load-at", type=float, default=20.0)
    args = parser.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("needs two CPUs")
    argv = ["heat2d", str(args.rows), str(args.rows), str(args.iterations), "8"]
    times = {"load": args.load_at, "join": args.join_at, "more load": args.more_load_at}
    print("command: cd benchmarks && python spmd_reconfig.py " + " ".join(sys.argv[1:]))
    results: dict[str, list[dict[str, Any]]] = {"reconfigurable": [], "static": []}
    for i in range(args.repeat):
        for label in results:
            run = one_run(label == "reconfigurable", argv, times)
            results[label].append(run)
            print(
                f"  run {i + 1} {label}: {run['seconds']:.1f} s, {run['moves']} moves", flush=True
            )
    med = {label: statistics.median(r["seconds"] for r in runs) for label, runs in results.items()}
    print()
    print(f"heat2d {args.rows}x{args.rows}, {args.iterations} iterations, 8 entities")
    print()
    print("| placement | total s (median) | runs | entity moves (median) |")
    print("|---|---|---|---|")
    for label, runs in results.items():
        secs = ", ".join(f"{r['seconds']:.1f}" for r in runs)
        moves = statistics.median(r["moves"] for r in runs)
        print(f"| {label} | {med[label]:.1f} | {secs} | {moves:.0f} |")
    print()
    print(f"static / reconfigurable: {med['static'] / med['reconfigurable']:.2f}")
    typical = {
        label: min(runs, key=lambda r: abs(r["seconds"] - med[label]))
        for label, runs in results.items()
    }
    path = DOCS / "spmd-fig6-7.png"
    plot(typical, times, path)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
