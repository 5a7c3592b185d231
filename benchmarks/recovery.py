"""Fault-tolerance experiments in the simulator (issue: fault tolerance, malleability and
migration): the shape of satin-fault-tolerance Figure 4 and Table 2 (the Satin paper's
Table VII), with the plot docs/recovery-fig4.png.

* Figure 4 (a): 2 clusters of 8 peers; one cluster goes away at half the fault-free runtime.
  Runtimes of (a) naive recomputation after a crash, (b) orphan saving after a crash,
  (c) a graceful leave (drain), (d) 1.5 clusters (8 + 4 peers) with no one leaving.
* Figure 4 (b): migration. 4 clusters of 4 peers; at half time a new cluster joins and one of
  the four drains, against the same 4 clusters with no migration.
* Table 2: jobs in orphan tables, % of them reused and the messages that carried tuples, when
  the crashed cluster is not the master's ("master lives") and when it is ("master dies").

    python benchmarks/recovery.py [--seeds 5] [--leaf-ms 200]

Every number is the median over the seeds; ratios are of medians measured in this run.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from satind.sim.scenario import parse
from satind.sim.simulator import SimReport, simulate

ROOT = Path(__file__).resolve().parent.parent
SUBMIT_AT = 5.0


def scenario(
    clusters: dict[str, int],
    faults: list[dict[str, Any]],
    leaf_ms: float,
    orphans: bool = True,
    name: str = "recovery",
    *,
    checkpoint: dict[str, Any] | None = None,
    steal: str = "crs",
) -> dict[str, Any]:
    """A scenario of 2-cluster fault experiments (also benchmarks/partial_crash.py's):
    ``checkpoint``: its [checkpoint] settings, if any."""
    config: dict[str, Any] = {
        # Failure detection in about 2 s, as in the other fault scenarios.
        "membership": {"probe_interval_s": 0.5, "suspicion_mult": 3},
        "ft": {"orphans": orphans},
    }
    if checkpoint is not None:
        config["checkpoint"] = checkpoint
    return {
        "name": name,
        "seed": 1,
        "duration_s": 1800.0,
        "peers": {"clusters": clusters},
        "network": {"latency_ms": 0.5, "wide_latency_ms": 10.0},
        "workload": {
            "depth": 5,
            "branching": 4,
            "leaf_ms": leaf_ms,
            "dist": "exp",
            "imbalance": 0.3,
            "submit_at": SUBMIT_AT,
            "steal": steal,
        },
        "config": config,
        "faults": faults,
    }


def run(spec: dict[str, Any], seeds: range) -> list[SimReport]:
    reports = []
    for seed in seeds:
        report = simulate(parse(spec), seed)
        assert report.invariants_ok and report.result_ok, (spec["name"], seed, report.violations)
        reports.append(report)
    return reports


def med(reports: list[SimReport], key: Callable[[SimReport], float]) -> float:
    return statistics.median(key(r) for r in reports)


def makespan(r: SimReport) -> float:
    assert r.makespan_s is not None
    return r.makespan_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--leaf-ms", type=float, default=200.0)
    parser.add_argument("--plot", default="docs/recovery-fig4.png")
    args = parser.parse_args()
    seeds = range(1, args.seeds + 1)
    leaf = args.leaf_ms
    print(f"command: python benchmarks/recovery.py --seeds {args.seeds} --leaf-ms {leaf:g}\n")

    two = {"c0": 8, "c1": 8}
    full = run(scenario(two, [], leaf, name="2 clusters"), seeds)
    t_full = med(full, makespan)
    half = SUBMIT_AT + t_full / 2
    crash_c1 = [{"at": half, "crash_cluster": "c1"}]
    crash_c0 = [{"at": half, "crash_cluster": "c0"}]
    drain_c1 = [{"at": half, "drain": [f"c1/{i}" for i in range(8)]}]
    rows = {
        "2 clusters, no one leaves": full,
        "(a) crash, naive recomputation": run(
            scenario(two, crash_c1, leaf, orphans=False, name="a"), seeds
        ),
        "(b) crash, orphan saving": run(scenario(two, crash_c1, leaf, name="b"), seeds),
        "(c) graceful leave (drain)": run(scenario(two, drain_c1, leaf, name="c"), seeds),
        "(d) 1.5 clusters, no one leaves": run(
            scenario({"c0": 8, "c1": 4}, [], leaf, name="d"), seeds
        ),
    }
    print(f"## Figure 4 (a): one of 2 clusters (8 + 8 peers) leaves at {t_full / 2:.2f} s\n")
    print(
        "| variant | makespan (virtual s, median) | work redone (s) | jobs restarted | "
        "results reused |"
    )
    print("|---|---|---|---|---|")
    for label, reports in rows.items():
        print(
            f"| {label} | {med(reports, makespan):.2f} | "
            f"{med(reports, lambda r: r.redone_s):.1f} | "
            f"{med(reports, lambda r: r.jobs_restarted):g} | "
            f"{med(reports, lambda r: r.results_reused):g} |"
        )
    a = med(rows["(a) crash, naive recomputation"], makespan)
    b = med(rows["(b) crash, orphan saving"], makespan)
    c = med(rows["(c) graceful leave (drain)"], makespan)
    d = med(rows["(d) 1.5 clusters, no one leaves"], makespan)
    print(
        f"\n(b) is {100 * (a - b) / a:.1f}% faster than (a) (goal: at least 25%); "
        f"(c) is {100 * (c - d) / d:+.1f}% against (d) (goal: within 8%)\n"
    )

    four = {f"c{i}": 4 for i in range(4)}
    stay = run(scenario(four, [], leaf, name="4 clusters"), seeds)
    t4 = med(stay, makespan)
    migrate = [
        {"at": SUBMIT_AT + t4 / 2, "join": 4, "join_cluster": "c4"},
        {"at": SUBMIT_AT + t4 / 2 + 1.0, "drain": [f"c3/{i}" for i in range(4)]},
    ]
    moved = run(scenario(four, migrate, leaf, name="migration"), seeds)
    m_stay, m_moved = med(stay, makespan), med(moved, makespan)
    print("## Figure 4 (b): migration, 4 clusters of 4 peers; at half time c4 joins, c3 drains\n")
    print("| variant | makespan (virtual s, median) | work redone (s) |")
    print("|---|---|---|")
    print(f"| no migration | {m_stay:.2f} | {med(stay, lambda r: r.redone_s):.1f} |")
    print(
        f"| migration (replace 1 of 4 clusters) | {m_moved:.2f} | "
        f"{med(moved, lambda r: r.redone_s):.1f} |"
    )
    print(f"\nmigration overhead {100 * (m_moved - m_stay) / m_stay:+.1f}% (goal: under 2%)\n")

    master_dies = run(scenario(two, crash_c0, leaf, name="master dies"), seeds)
    lives = rows["(b) crash, orphan saving"]
    print("## Table 2: orphans after a crash of 1 of 2 clusters\n")
    print("| | jobs in orphan tables | reused | % reused | messages carrying tuples |")
    print("|---|---|---|---|---|")
    for label, reports in (("master lives", lives), ("master dies", master_dies)):
        tuples = med(reports, lambda r: r.tuples_sent)
        reused = med(reports, lambda r: r.results_reused)
        share = med(
            reports, lambda r: 100 * r.results_reused / r.tuples_sent if r.tuples_sent else 0.0
        )
        print(
            f"| {label} | {tuples:g} | {reused:g} | {share:.0f}% | "
            f"{med(reports, lambda r: r.tuple_messages):g} |"
        )
    print("\n(goal: at least 95% of orphan-table jobs reused when the master survives)")

    plot(rows, stay, moved, ROOT / args.plot)
    print(f"\nplot: {args.plot}")


def plot(
    rows: dict[str, list[SimReport]],
    stay: list[SimReport],
    moved: list[SimReport],
    path: Path,
) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\n(matplotlib not installed: pip install -e '.[bench]' for the plot)")
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4), width_ratios=[5, 2])
    labels = list(rows)
    left.bar(
        range(len(labels)),
        [med(rows[k], makespan) for k in labels],
        color=["grey", "tab:red", "tab:green", "tab:blue", "tab:orange"],
    )
    short = [
        "2 clusters",
        "(a) crash,\nnaive",
        "(b) crash,\norphans",
        "(c) drain",
        "(d) 1.5\nclusters",
    ]
    left.set_xticks(range(len(labels)), short, fontsize=8)
    left.set_ylabel("makespan, virtual s (median)")
    left.set_title("(a) one of 2 clusters leaves at half time")
    right.bar([0, 1], [med(stay, makespan), med(moved, makespan)], color=["grey", "tab:blue"])
    right.set_xticks([0, 1], ["no\nmigration", "migrate\n1 of 4"], fontsize=8)
    right.set_title("(b) migration")
    for ax in (left, right):
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle("satind simulator: recovery from leaving peers (shape of satin-ft Fig. 4)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
