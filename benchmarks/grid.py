"""The Satin paper's scalability experiments in the simulator (satin-grid-programming-model
§5.3, §5.4, §5.7), at the paper's processor counts:

- ``--fig4``: speed-ups on one cluster of 16 to 256 peers (Figure 4; the VU cluster of DAS-3);
- ``--fig5``: one to five clusters, adding DAS-3's clusters in the paper's order (Table II:
  256, 48, 128, 96, 48 cores, their clock speeds relative to the VU's 2.4 GHz, 1 ms one way
  between clusters), 256 to 576 peers (Figure 5), with the efficiency and the local against
  wide-area steals of the 576-peer run (Tables V and VI);
- ``--large``: 960 peers in five clusters, as the Grid'5000 N-Queens run of §5.7.

    python benchmarks/grid.py --fig4 --fig5 --large [--seeds 1] [--leaf-scale 10]

The applications are not simulated: each is a synthetic tree with its shape (the simulator's
workloads: depth, branching, leaf times), its jobs scaled down so that a run simulates in
minutes; ``--leaf-scale`` multiplies the leaves' times (10: runs of tens of seconds at the
largest counts, closer to the paper's minutes). The speed-up is T1 / makespan, T1 the sum
of the leaves' costs on a speed-1 peer (what one peer computes, without overheads); the
efficiency divides it by the peers' total speed. The simulator runs the real peer code
(membership, steals, the engine) on virtual time; messages cost their latency, not CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import shlex
import statistics
import sys
import time

from satind.sim.scenario import Scenario, parse
from satind.sim.simulator import simulate

# name -> (depth, branching, leaf ms, distribution, imbalance): three shapes.
SHAPES = {
    # fine-grained and binary, like the gene sequencing and fib kind (2^14 leaves)
    "binary, 16k leaves of 40 ms": (14, 2, 40.0, "fixed", 0.0),
    # wide, like N-Queens or a game tree's first levels (8^5 leaves)
    "wide, 32k leaves of 20 ms": (5, 8, 20.0, "fixed", 0.0),
    # irregular, like branch and bound or grammar induction (4^7 leaves, exponential times)
    "irregular, 16k leaves of 40 ms": (7, 4, 40.0, "exp", 0.3),
}
# Table II, in the order Figure 5 adds them: cores, and speed relative to the VU's 2.4 GHz.
DAS3 = (("vu", 256, 1.0), ("leiden", 48, 2.6 / 2.4), ("uva", 128, 2.2 / 2.4),
        ("delft", 96, 1.0), ("mn", 48, 1.0))  # fmt: skip
FIG4_PEERS = (16, 32, 64, 128, 256)
# §5.7: Grid'5000, five clusters of 960 nodes in all, up to 1000 km apart.
LARGE = (("c0", 320), ("c1", 224), ("c2", 160), ("c3", 128), ("c4", 128))


# The leaves' times are multiplied by this (``--leaf-scale``).
LEAF_SCALE = [1.0]


def scenario(
    shape: str, clusters: dict[str, int], speeds: dict[str, float], wide_ms: float
) -> Scenario:
    depth, branching, leaf_ms, dist, imbalance = SHAPES[shape]
    leaf_ms *= LEAF_SCALE[0]
    return parse(
        {
            "name": f"{shape} on {sum(clusters.values())}",
            "seed": 1,
            "duration_s": 3600.0,
            "peers": {"clusters": clusters, "speeds": speeds, "bootstrap": "converged"},
            "network": {"latency_ms": 0.05, "wide_latency_ms": wide_ms},
            "workload": {
                "depth": depth,
                "branching": branching,
                "leaf_ms": leaf_ms,
                "dist": dist,
                "imbalance": imbalance,
                "submit_at": 2.0,
                "steal": "crs",
            },
            # Idle thieves back off further with hundreds of peers (the steady scenario's).
            "config": {"steal": {"backoff_max_s": 0.2}},
        }
    )


def measure(sc: Scenario, seeds: int) -> dict[str, float]:
    rows = []
    for seed in range(1, seeds + 1):
        report = simulate(dataclasses.replace(sc, seed=seed), seed)
        if not (report.result_ok and report.invariants_ok) or report.makespan_s is None:
            raise SystemExit(f"{sc.name} (seed {seed}): {report.violations}")
        rows.append(report)
    speed = sum(n * sc.speeds.get(c, 1.0) for c, n in sc.clusters.items())
    makespan = statistics.median(r.makespan_s or 0.0 for r in rows)
    work = statistics.median(r.work_s for r in rows)  # T1: the leaves' costs, speed 1
    return {
        "makespan": makespan,
        "speedup": work / makespan,
        "efficiency": work / makespan / speed,
        "jobs": statistics.median(r.result_spawns for r in rows),
        "local": statistics.median(r.stolen_local for r in rows),
        "wide": statistics.median(r.stolen_wide for r in rows),
        "wall": statistics.median(r.wall_s for r in rows),
    }


def fig4(seeds: int) -> None:
    print("\n### Figure 4: speed-ups on one cluster\n")
    print("| shape | " + " | ".join(f"{p} peers" for p in FIG4_PEERS) + " |")
    print("|---" * (len(FIG4_PEERS) + 1) + "|")
    for shape in SHAPES:
        cells = []
        for peers in FIG4_PEERS:
            got = measure(scenario(shape, {"vu": peers}, {}, 1.0), seeds)
            cells.append(f"{got['speedup']:.0f} ({got['efficiency']:.0%})")
            print(f"  {shape}, {peers}: {got}", file=sys.stderr, flush=True)
        print(f"| {shape} | " + " | ".join(cells) + " |", flush=True)


def fig5(seeds: int) -> None:
    print("\n### Figure 5: one to five clusters (DAS-3, Table II)\n")
    sizes = [sum(n for _, n, _ in DAS3[: k + 1]) for k in range(len(DAS3))]
    print("| shape | " + " | ".join(f"{n} peers" for n in sizes) + " |")
    print("|---" * (len(sizes) + 1) + "|")
    last: dict[str, dict[str, float]] = {}
    for shape in SHAPES:
        cells = []
        for k in range(len(DAS3)):
            used = DAS3[: k + 1]
            got = measure(
                scenario(shape, {c: n for c, n, _ in used}, {c: s for c, _, s in used}, 1.0),
                seeds,
            )
            cells.append(f"{got['speedup']:.0f} ({got['efficiency']:.0%})")
            print(f"  {shape}, {k + 1} clusters: {got}", file=sys.stderr, flush=True)
            last[shape] = got
        print(f"| {shape} | " + " | ".join(cells) + " |", flush=True)
    print("\n### Tables V and VI: the 576-peer runs\n")
    print("| shape | jobs spawned | efficiency | jobs stolen locally | stolen wide-area |")
    print("|---|---|---|---|---|")
    for shape, got in last.items():
        print(
            f"| {shape} | {got['jobs']:,.0f} | {got['efficiency']:.0%} | {got['local']:,.0f} | "
            f"{got['wide']:,.0f} |"
        )


def large(seeds: int) -> None:
    print("\n### §5.7: 960 peers in five clusters (10 ms one way between them)\n")
    print("| shape | makespan (virtual s) | speed-up | efficiency | stolen local / wide | wall s |")
    print("|---|---|---|---|---|---|")
    for shape in ("wide, 32k leaves of 20 ms",):
        got = measure(scenario(shape, dict(LARGE), {}, 10.0), seeds)
        print(
            f"| {shape} | {got['makespan']:.1f} | {got['speedup']:.0f} | "
            f"{got['efficiency']:.0%} | {got['local']:,.0f} / {got['wide']:,.0f} | "
            f"{got['wall']:.0f} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fig4", action="store_true")
    parser.add_argument("--fig5", action="store_true")
    parser.add_argument("--large", action="store_true")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--leaf-scale", type=float, default=1.0)
    args = parser.parse_args()
    logging.getLogger("satind").setLevel(logging.ERROR)
    print("command: python benchmarks/grid.py " + shlex.join(sys.argv[1:]))
    started = time.monotonic()
    LEAF_SCALE[0] = args.leaf_scale
    if args.fig4:
        fig4(args.seeds)
    if args.fig5:
        fig5(args.seeds)
    if args.large:
        large(args.seeds)
    print(
        f"\n(leaf times as named, x {args.leaf_scale:g}; "
        f"{time.monotonic() - started:.0f} s of wall time)"
    )


if __name__ == "__main__":
    main()
