"""Simulator benchmarks (issue: deterministic simulator): simulator speed in simulated
peer-seconds per wall second, and membership convergence time against the number of peers
(with the plot docs/sim-convergence.png).

    python benchmarks/simulator.py [--sizes 16,32,64,128,256,512,1000] [--repeat 3]
    python benchmarks/simulator.py --scale 250,500,1000,2000   # the steady scenario's curve

``--scale`` runs the steady scenario (configs/scenarios/steady-1000.toml) at each size: four
clusters of a quarter each, its leaves scaled with the size (the same work per peer), one
simulation per child process (its own peak RSS). It prints wall time, peak RSS and its share
per peer, and messages per peer per virtual second (flat when every peer's traffic is O(1)).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import statistics
import subprocess
import sys
from pathlib import Path

from satind.sim.scenario import load, parse
from satind.sim.simulator import simulate

ROOT = Path(__file__).resolve().parent.parent


def convergence(n: int, seed: int) -> tuple[float | None, float, int]:
    clusters = {"c0": n // 2, "c1": n - n // 2} if n > 1 else {"c0": 1}
    scenario = parse(
        {
            "name": f"join-{n}",
            "seed": seed,
            "duration_s": 300.0,
            "peers": {"clusters": clusters},
            "network": {"latency_ms": 0.5, "wide_latency_ms": 10.0},
        }
    )
    report = simulate(scenario)
    assert report.invariants_ok, report.violations
    return report.convergence_s, report.wall_s, report.messages


def steady(n: int, seed: int) -> dict[str, float]:
    """The steady scenario with ``n`` peers, in this process (``--one``)."""
    base = ROOT / "configs/scenarios/steady-1000.toml"
    scenario = load(base)
    quarter = {f"c{i}": n // 4 + (1 if i < n % 4 else 0) for i in range(4)}
    # The same tree, its leaves scaled with the peers: the same work per peer, so the run
    # takes about as long (a minute of virtual time) at every size.
    assert scenario.workload is not None
    work = dataclasses.replace(scenario.workload, leaf_ms=scenario.workload.leaf_ms * n / 1000)
    scenario = dataclasses.replace(scenario, clusters=quarter, workload=work, name=f"steady-{n}")
    report = simulate(scenario, seed)
    assert report.invariants_ok, report.violations
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "peers": report.peers,
        "wall_s": report.wall_s,
        "virtual_s": report.virtual_s,
        "messages": report.messages,
        "rss_mb": rss_mb,
    }


def scale(sizes: list[int], seed: int) -> None:
    print("## the steady scenario against the number of peers\n")
    print(
        "| peers | wall s | virtual s | messages / peer / virtual s | peak RSS MB | KB per peer |"
    )
    print("|---|---|---|---|---|---|")
    for n in sizes:
        proc = subprocess.run(
            [sys.executable, __file__, "--one", str(n), "--seed", str(seed)],
            capture_output=True,
            text=True,
            check=True,
        )
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        rate = got["messages"] / got["peers"] / got["virtual_s"]
        print(
            f"| {got['peers']:,.0f} | {got['wall_s']:.1f} | {got['virtual_s']:.1f} | "
            f"{rate:.2f} | {got['rss_mb']:.0f} | {got['rss_mb'] * 1024 / got['peers']:.0f} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", help="peer counts for the steady scenario, comma-separated")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sizes", default="16,32,64,128,256,512,1000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--speed-scenario", default="configs/scenarios/steady-1000.toml")
    parser.add_argument("--plot", default="docs/sim-convergence.png")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(steady(args.one, args.seed)))
        return
    if args.scale:
        scale([int(s) for s in args.scale.split(",")], args.seed)
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"command: python benchmarks/simulator.py --sizes {args.sizes} --repeat {args.repeat}\n")

    print("## simulator speed\n")
    scenario = load(ROOT / args.speed_scenario)
    walls, rates = [], []
    for seed in range(1, args.repeat + 1):
        report = simulate(scenario, seed)
        assert report.invariants_ok, report.violations
        walls.append(report.wall_s)
        rates.append(report.peers * report.virtual_s / report.wall_s)
        print(
            f"seed {seed}: {report.peers} peers x {report.virtual_s:.1f} virtual s in "
            f"{report.wall_s:.1f} wall s ({rates[-1]:,.0f} peer-s per wall s), "
            f"{report.messages:,} messages",
            flush=True,
        )
    print(
        f"\nmedian: {statistics.median(walls):.1f} wall s, "
        f"{statistics.median(rates):,.0f} simulated peer-seconds per wall second\n"
    )

    print("## membership convergence after a join storm (every peer joins through one seed)\n")
    print("| peers | converged at (virtual s, median) | runs | wall s (median) | messages |")
    print("|---|---|---|---|---|")
    medians = []
    for n in sizes:
        rows = [convergence(n, seed) for seed in range(1, args.repeat + 1)]
        times = [r[0] for r in rows if r[0] is not None]
        median = statistics.median(times) if times else float("nan")
        medians.append(median)
        print(
            f"| {n} | {median:.2f} | {len(times)}/{len(rows)} | "
            f"{statistics.median(r[1] for r in rows):.1f} | "
            f"{int(statistics.median(r[2] for r in rows)):,} |",
            flush=True,
        )
    plot(sizes, medians, ROOT / args.plot)
    print(f"\nplot: {args.plot}")


def plot(sizes: list[int], medians: list[float], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\n(matplotlib not installed: pip install -e '.[bench]' for the plot)")
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(sizes, medians, marker="o")
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("peers (log scale)")
    ax.set_ylabel("virtual seconds until all see all")
    ax.set_title("membership convergence after a join storm (simulated)")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
