"""Two versions of satind on the same workloads, interleaved: `satind run --json` from this
checkout and from another (e.g. a git worktree of an older main), one after the other, so
that this VM's drift hits both alike. Prints the median elapsed time of each and their ratio.

    python benchmarks/against.py --against DIR [--repeat 5] [--peers 2] [WORKLOAD ...]

A WORKLOAD is a plugin with its arguments in one string (default: "nqueens 14", "fib 37",
"tree 3 8 12 busy"). Both versions run the built-in plugins of this checkout (the package
``satind_plugins`` that is installed); the runtime (``satind``) comes from each checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ["nqueens 14", "fib 37", "tree 3 8 12 busy"]


def elapsed(tree: Path, workload: str, peers: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    more = ["--peers", str(peers), "--json", "--no-check"]
    proc = subprocess.run(
        [sys.executable, "-m", "satind", "run", *workload.split(), *more],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: satind run {workload} failed:\n{proc.stderr}")
    return float(json.loads(proc.stdout)["elapsed_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=Path, required=True, help="the other checkout")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--peers", type=int, default=2)
    parser.add_argument("workloads", nargs="*", default=DEFAULT)
    args = parser.parse_args()
    print(f"this: {ROOT}  other: {args.against}  peers: {args.peers}  repeat: {args.repeat}\n")
    print("| workload | other s (median) | this s (median) | this / other |")
    print("|---|---|---|---|")
    for workload in args.workloads:
        mine: list[float] = []
        other: list[float] = []
        for _ in range(args.repeat):
            other.append(elapsed(args.against, workload, args.peers))
            mine.append(elapsed(ROOT, workload, args.peers))
        a, b = statistics.median(other), statistics.median(mine)
        print(f"| {workload} | {a:.3f} | {b:.3f} | {b / a:.2f} |", flush=True)


if __name__ == "__main__":
    main()
