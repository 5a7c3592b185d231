"""KAAPI's Figures 1 and 3 (kaapi-checkpoint-recovery-work-stealing §5):

- ``--threshold``: the tasks a run generates against its threshold of parallelism (the depth
  of recursion past which no more tasks are spawned; Figure 1), and what they cost on one
  peer, with `satind run nqueens N DEPTH --peers 1` (nqueens's DEPTH is exactly that
  threshold; the paper's QAP instance is a branch and bound of the same kind);
- ``--scale``: the checkpoints against the number of peers (Figure 3): the same tree on 4 to
  64 simulated peers with each policy, the makespan and what the policies write. The
  simulator charges no CPU time for writing a log (its store is memory), so the makespan
  column shows the protocol's cost only: messages and the thefts that "tic" answers with a
  snapshot; the bytes and records per peer show how the logs grow with the peers.

    python benchmarks/kaapi.py --threshold [--n 13] [--repeat 3]
    python benchmarks/kaapi.py --scale
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import shlex
import statistics
import subprocess
import sys

from satind.sim.scenario import parse
from satind.sim.simulator import simulate

POLICIES = ("off", "orphans", "tic", "sel")
PEERS = (4, 8, 16, 32, 64)


def threshold(n: int, repeat: int) -> None:
    print(f"\n### Figure 1: tasks against the threshold of parallelism (nqueens {n}, 1 peer)\n")
    print("| threshold (DEPTH) | tasks spawned | time (s) | vs DEPTH 1 |")
    print("|---|---|---|---|")
    base = None
    for depth in range(1, n + 1):
        times, spawns = [], 0
        for _ in range(repeat):
            out = subprocess.run(
                [sys.executable, "-m", "satind", "run", "nqueens", str(n), str(depth),
                 "--peers", "1", "--json"],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            report = json.loads(out.stdout)
            assert report["check"] == "ok", report
            times.append(float(report["elapsed_s"]))
            spawns = int(report["stats"]["spawns"])
        t = statistics.median(times)
        base = base or t
        print(f"| {depth} | {spawns:,} | {t:.2f} | {t / base - 1:+.1%} |", flush=True)


def scale() -> None:
    print("\n### Figure 3: checkpoints against the number of peers (simulator)\n")
    print(
        "A tree of 4^7 = 16,384 leaves of 20 ms (exponential), its work scaled with the peers "
        "(the same per peer); checkpoints every 1 s to a shared store.\n"
    )
    print("| peers | policy | makespan (virtual s) | vs off | records per peer | KB per peer |")
    print("|---|---|---|---|---|---|")
    for peers in PEERS:
        off = None
        for policy in POLICIES:
            config: dict[str, object] = {"steal": {"backoff_max_s": 0.2}}
            if policy != "off":
                config["checkpoint"] = {"dir": "shared", "interval_s": 1.0, "policy": policy}
            sc = parse(
                {
                    "name": f"kaapi-{peers}-{policy}",
                    "seed": 1,
                    "duration_s": 3600.0,
                    "peers": {"clusters": {"c0": peers}, "bootstrap": "converged"},
                    "network": {"latency_ms": 0.05},
                    "workload": {
                        "depth": 7,
                        "branching": 4,
                        "leaf_ms": 20.0 * peers / 16,
                        "dist": "exp",
                        "submit_at": 2.0,
                    },
                    "config": config,
                }
            )
            report = simulate(dataclasses.replace(sc), 1)
            if not (report.result_ok and report.invariants_ok) or report.makespan_s is None:
                raise SystemExit(f"{sc.name}: {report.violations}")
            makespan = report.makespan_s
            off = off or makespan
            records = report.checkpoint_records / peers
            kb = report.checkpoint_bytes / peers / 1024
            print(
                f"| {peers} | {policy} | {makespan:.2f} | {makespan / off - 1:+.1%} | "
                f"{records:,.0f} | {kb:,.1f} |",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threshold", action="store_true")
    parser.add_argument("--scale", action="store_true")
    parser.add_argument("--n", type=int, default=13)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    logging.getLogger("satind").setLevel(logging.ERROR)
    print("command: python benchmarks/kaapi.py " + shlex.join(sys.argv[1:]))
    if args.threshold:
        threshold(args.n, args.repeat)
    if args.scale:
        scale()


if __name__ == "__main__":
    main()
