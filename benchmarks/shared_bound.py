"""Branch and bound with the bound as a shared object against the bound passed down as an
argument (satin-grid-programming-model §3.2): tsp and knapsack on local peers, each run in
both modes (the plugins' last argument), interleaved, median of --repeat runs. Time is the
run's own ``elapsed_s``; nodes visited (the plugins' ``app_nodes``), jobs, messages and
bytes are the run's statistics.

    python benchmarks/shared_bound.py [--repeat 3] [--peers 4]
"""

from __future__ import annotations

import argparse
from typing import Any

from speculation import row, run

WORKLOADS = [("tsp", ["tsp", "14", "2"]), ("knapsack", ["knapsack", "200", "2"])]
COLUMNS = ["app_nodes", "jobs_run", "messages", "bytes", "shared_updates_sent", "replica_fetches"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--peers", type=int, default=4)
    args = parser.parse_args()
    got: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _ in range(args.repeat):
        for name, argv in WORKLOADS:
            for mode in ("shared", "args"):
                got.setdefault((name, mode), []).append(run([*argv, mode], args.peers, None))
    print(f"{args.peers} local peers, median of {args.repeat} interleaved runs\n")
    print("| workload | bound | time s | " + " | ".join(COLUMNS) + " |")
    print("|---|---|---|" + "---|" * len(COLUMNS))
    for name, argv in WORKLOADS:
        for mode in ("shared", "args"):
            print(row([" ".join(argv), mode], got[(name, mode)], COLUMNS))


if __name__ == "__main__":
    main()
