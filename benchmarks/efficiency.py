"""Parallel efficiency from the peers' own accounting (issue 33, point 6): each run's
``efficiency`` is the time its peers' compute sides spent on its jobs (``busy_s``) over
peers x elapsed, as the Satin paper measures it (§4.5): no sequential baseline, so a machine
that runs slower one minute than the next cancels out of the ratio.

    python benchmarks/efficiency.py [--repeat 5] [--peers 2,4] [--quick]

Every workload at every peer count once per repetition, in turn (interleaved). Prints a
markdown table of medians: efficiency, elapsed time, busy time, and the steals.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from core import satind_run

WORKLOADS: list[tuple[str, list[str]]] = [
    ("nqueens 14", ["nqueens", "14"]),
    ("fib 38", ["fib", "38"]),
    ("raytracer 1024x1024", ["raytracer", "1024", "1024"]),
]
QUICK: list[tuple[str, list[str]]] = [
    ("nqueens 12", ["nqueens", "12"]),
    ("fib 30", ["fib", "30"]),
    ("raytracer 128x128", ["raytracer", "128", "128"]),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--peers", default="2,4", help="peer counts, comma-separated")
    parser.add_argument("--quick", action="store_true", help="small workloads (a smoke test)")
    args = parser.parse_args()
    peer_counts = [int(p) for p in args.peers.split(",")]
    workloads = QUICK if args.quick else WORKLOADS
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    for _ in range(args.repeat):
        for label, argv in workloads:
            for peers in peer_counts:
                out = satind_run(*argv, "--peers", str(peers), "--no-check")
                stats = out["stats"]
                runs.setdefault((label, peers), []).append(
                    {
                        "efficiency": out["efficiency"],
                        "elapsed_s": out["elapsed_s"],
                        "busy_s": stats["busy_s"],
                        "stolen": stats["stolen_local"] + stats["stolen_wide"],
                    }
                )
    print(f"medians of {args.repeat} runs each, interleaved\n")
    print("| workload | peers | efficiency | min-max | elapsed s | busy s | jobs stolen |")
    print("|---|---|---|---|---|---|---|")
    for label, _ in workloads:
        for peers in peer_counts:
            got = runs[(label, peers)]

            def med(key: str, got: list[dict[str, float]] = got) -> float:
                return statistics.median(r[key] for r in got)

            effs = [r["efficiency"] for r in got]
            print(
                f"| {label} | {peers} | {med('efficiency'):.3f} | {min(effs):.3f}-"
                f"{max(effs):.3f} | {med('elapsed_s'):.3f} | {med('busy_s'):.3f} | "
                f"{med('stolen'):.0f} |"
            )


if __name__ == "__main__":
    main()
