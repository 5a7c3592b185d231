"""Recovery experiments of issue 31, in the simulator: checkpoints after a partial crash, the
leave with a deadline, and why orphan saving gains what it gains.

* Fig 6 of satin-grid-programming-model (§5.5): 2 clusters of 8 peers; one cluster crashes at
  half the fault-free runtime (the master's, or the other one). Normalized runtimes of naive
  recomputation, orphan saving, and orphan saving with checkpoints read by the survivors
  (policies orphans, tic and sel on a shared mount; tic with copies on members).
* A KAAPI Fig 4-style curve: the cost of recovery against the number of peers lost at once,
  without and with checkpoints (tic, shared mount).
* Fig 4 (a) of satin-fault-tolerance, the leaving rows: a cluster drained at half time with no
  deadline (it finishes its work) and with deadline 0 (the paper's leave), against 1.5
  clusters; Fig 4 (b), migration, with both leaves.
* Orphans against naive: the gain of (b) over (a) against when the crash hits and the steal
  algorithm (CRS, RS), with the share of the crashed cluster's work that survivors had stolen.

    python benchmarks/partial_crash.py [--seeds 5] [--leaf-ms 200]

Every number is the median over the seeds; ratios are of medians measured in this run.
"""

from __future__ import annotations

import argparse
from typing import Any

# The scenario and the medians of benchmarks/recovery.py (run as a script from benchmarks/).
from recovery import SUBMIT_AT, makespan, med, run, scenario


def ckpt(policy: str, where: str = "shared", interval: float = 1.0) -> dict[str, Any]:
    return {"dir": where, "policy": policy, "interval_s": interval, "copies": 1}


def fig6(seeds: range, leaf: float) -> None:
    two = {"c0": 8, "c1": 8}
    t_full = med(run(scenario(two, [], leaf), seeds), makespan)
    # The crash falls in the middle of a 1 s checkpoint interval (the peers start at 0).
    at = round(SUBMIT_AT + t_full / 2) + 0.5
    print(f"## Fig 6: one of 2 clusters (8 + 8 peers) crashes at {at - SUBMIT_AT:.1f} s")
    print(f"(fault-free makespan {t_full:.2f} virtual s; normalized to it)\n")
    variants: list[tuple[str, dict[str, Any]]] = [
        ("naive recomputation", {"orphans": False}),
        ("orphan saving", {}),
        ("+ checkpoints, orphans, shared", {"checkpoint": ckpt("orphans")}),
        ("+ checkpoints, tic, shared", {"checkpoint": ckpt("tic")}),
        ("+ checkpoints, sel, shared", {"checkpoint": ckpt("sel")}),
        ("+ checkpoints, tic, copies", {"checkpoint": ckpt("tic", "local")}),
    ]
    print(
        "| crashed cluster | variant | normalized runtime | work redone (leaf s) | "
        "results from logs | results reused |"
    )
    print("|---|---|---|---|---|---|")
    for side, cluster in (("the other one", "c1"), ("the master's", "c0")):
        faults = [{"at": at, "crash_cluster": cluster}]
        for label, extra in variants:
            reports = run(scenario(two, faults, leaf, **extra), seeds)
            print(
                f"| {side} | {label} | {med(reports, makespan) / t_full:.3f} | "
                f"{med(reports, lambda r: r.redone_s):.1f} | "
                f"{med(reports, lambda r: r.results_from_logs):g} | "
                f"{med(reports, lambda r: r.results_reused):g} |"
            )
    print()


def faults_curve(seeds: range, leaf: float) -> None:
    two = {"c0": 8, "c1": 8}
    t_full = med(run(scenario(two, [], leaf), seeds), makespan)
    at = round(SUBMIT_AT + t_full / 2) + 0.5
    print("## Recovery cost against the number of peers lost at once (KAAPI Fig 4's shape)")
    print(f"(16 peers; the peers c1/0.. crash at {at - SUBMIT_AT:.1f} s; the master is c0/0)\n")
    print(
        "| peers lost | orphan saving: overhead | work redone (leaf s) | "
        "with tic checkpoints: overhead | work redone (leaf s) | results from logs |"
    )
    print("|---|---|---|---|---|---|")
    for lost in (1, 2, 4, 8):
        faults = [{"at": at, "crash": [f"c1/{i}" for i in range(lost)]}]
        plain = run(scenario(two, faults, leaf), seeds)
        logged = run(scenario(two, faults, leaf, checkpoint=ckpt("tic")), seeds)
        print(
            f"| {lost} | {100 * (med(plain, makespan) / t_full - 1):+.1f}% | "
            f"{med(plain, lambda r: r.redone_s):.1f} | "
            f"{100 * (med(logged, makespan) / t_full - 1):+.1f}% | "
            f"{med(logged, lambda r: r.redone_s):.1f} | "
            f"{med(logged, lambda r: r.results_from_logs):g} |"
        )
    print()


def leaves(seeds: range, leaf: float) -> None:
    two = {"c0": 8, "c1": 8}
    t_full = med(run(scenario(two, [], leaf), seeds), makespan)
    half = SUBMIT_AT + t_full / 2
    drained = [f"c1/{i}" for i in range(8)]
    rows = {
        "(c) graceful leave, no deadline": [{"at": half, "drain": drained}],
        "(c') leave with deadline 0 (the paper's)": [
            {"at": half, "drain": drained, "deadline": 0.0}
        ],
    }
    d = med(run(scenario({"c0": 8, "c1": 4}, [], leaf), seeds), makespan)
    print("## Fig 4 (a), the leaving rows: cluster c1 (8 peers) leaves at half time\n")
    print(
        "| variant | makespan (virtual s) | against (d) 1.5 clusters | leaves within (s) | "
        "work redone (leaf s) | jobs restarted | results reused |"
    )
    print("|---|---|---|---|---|---|---|")
    for label, faults in rows.items():
        reports = run(scenario(two, faults, leaf), seeds)
        m = med(reports, makespan)
        gone = med(reports, lambda r: max(r.left_at.values()) - half)
        print(
            f"| {label} | {m:.2f} | {100 * (m - d) / d:+.1f}% | {gone:.2f} | "
            f"{med(reports, lambda r: r.redone_s):.1f} | "
            f"{med(reports, lambda r: r.jobs_restarted):g} | "
            f"{med(reports, lambda r: r.results_reused):g} |"
        )
    print(f"| (d) 1.5 clusters, no one leaves | {d:.2f} | | | | | |\n")

    four = {f"c{i}": 4 for i in range(4)}
    stay = med(run(scenario(four, [], leaf), seeds), makespan)
    mid = SUBMIT_AT + stay / 2
    print("## Fig 4 (b), migration: 4 clusters of 4; at half time c4 joins, c3 leaves\n")
    print("| variant | makespan (virtual s) | overhead | work redone (leaf s) |")
    print("|---|---|---|---|")
    print(f"| no migration | {stay:.2f} | | |")
    for label, deadline in (("drain, no deadline", None), ("leave with deadline 0", 0.0)):
        drain: dict[str, Any] = {"at": mid + 1.0, "drain": [f"c3/{i}" for i in range(4)]}
        if deadline is not None:
            drain["deadline"] = deadline
        faults = [{"at": mid, "join": 4, "join_cluster": "c4"}, drain]
        reports = run(scenario(four, faults, leaf), seeds)
        m = med(reports, makespan)
        print(
            f"| migration, {label} | {m:.2f} | {100 * (m - stay) / stay:+.1f}% | "
            f"{med(reports, lambda r: r.redone_s):.1f} |"
        )
    print()


def orphans_vs_naive(seeds: range, leaf: float) -> None:
    two = {"c0": 8, "c1": 8}
    print("## Orphan saving against naive recomputation: when the crash hits, CRS or RS\n")
    print(
        "| steal | crash at | (a) naive (s) | (b) orphans (s) | (b) faster by | "
        "work redone (a → b, leaf s) | results reused |"
    )
    print("|---|---|---|---|---|---|---|")
    for steal in ("crs", "rs"):
        t_full = med(run(scenario(two, [], leaf, steal=steal), seeds), makespan)
        for share in (0.25, 0.5, 0.75):
            faults = [{"at": SUBMIT_AT + share * t_full, "crash_cluster": "c1"}]
            a = run(scenario(two, faults, leaf, orphans=False, steal=steal), seeds)
            b = run(scenario(two, faults, leaf, steal=steal), seeds)
            ma, mb = med(a, makespan), med(b, makespan)
            print(
                f"| {steal} | {share:.0%} | {ma:.2f} | {mb:.2f} | {100 * (ma - mb) / ma:.1f}% | "
                f"{med(a, lambda r: r.redone_s):.1f} → {med(b, lambda r: r.redone_s):.1f} | "
                f"{med(b, lambda r: r.results_reused):g} |"
            )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--leaf-ms", type=float, default=200.0)
    args = parser.parse_args()
    seeds = range(1, args.seeds + 1)
    print(
        f"command: python benchmarks/partial_crash.py --seeds {args.seeds} "
        f"--leaf-ms {args.leaf_ms:g}\n"
    )
    fig6(seeds, args.leaf_ms)
    faults_curve(seeds, args.leaf_ms)
    leaves(seeds, args.leaf_ms)
    orphans_vs_naive(seeds, args.leaf_ms)


if __name__ == "__main__":
    main()
