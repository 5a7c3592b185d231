"""Table 2 and Figure 2 of Casanova et al., "Scheduling parallel iterative applications on
volatile resources" (§7), reproduced by satind's simulator of the model (satind/volatile): every
heuristic on the same random platforms and availability traces, the average degradation from
best and the wins per heuristic next to the paper's, and the average dfb against w_min for the
MCT family and the starred heuristics (the paper's Figure 2) in docs/volatile-fig2.png.

    python benchmarks/volatile_study.py [--platforms 2] [--trials 2] [--jobs 2]
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from plotting import has_matplotlib  # the scripts' directory: python benchmarks/...

from satind.volatile.study import N_COM, TASKS, W_MIN, Table, format_table, run_study

DOCS = Path(__file__).resolve().parent.parent / "docs"
FIGURE_2 = ("emct", "emct*", "mct", "mct*", "ud*", "lw*", "random1w")


def plot(table: Table, out: Path) -> None:
    if not has_matplotlib():
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    ws = sorted(table.by_w_min)
    for h in FIGURE_2:
        ax.plot(ws, [table.by_w_min[w][h] for w in ws], marker="o", label=h.upper())
    ax.set_xlabel("w_min (slots per task on the fastest possible worker)")
    ax.set_ylabel("average degradation from best (%)")
    ax.set_title(f"Heuristics on volatile workers ({table.instances} instances)")
    ax.legend(ncol=2, fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"plot: {out}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--platforms", type=int, default=2, help="platforms per scenario")
    parser.add_argument("--trials", type=int, default=2, help="trace seeds per platform")
    parser.add_argument("--jobs", type=int, default=2, help="processes")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args()
    print("command: python benchmarks/volatile_study.py " + shlex.join(sys.argv[1:]) + "\n")
    count = len(TASKS) * len(N_COM) * len(W_MIN) * args.platforms * args.trials
    started = time.perf_counter()
    table = run_study(args.platforms, args.trials, args.jobs, args.seed)
    took = time.perf_counter() - started
    print(f"{count} instances (the paper: 296,400), {took:.0f} s on {args.jobs} processes\n")
    print(format_table(table))
    print("\naverage dfb by w_min (Figure 2):\n")
    ws = sorted(table.by_w_min)
    print("| heuristic | " + " | ".join(str(w) for w in ws) + " |")
    print("|---|" + "---|" * len(ws))
    for h in FIGURE_2:
        print(f"| {h.upper()} | " + " | ".join(f"{table.by_w_min[w][h]:.1f}" for w in ws) + " |")
    if not args.no_plot:
        plot(table, DOCS / "volatile-fig2.png")


if __name__ == "__main__":
    main()
