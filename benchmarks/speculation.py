"""Speculative search with and without aborts (satin-grid-programming-model §5.2.4, Table IV):
othello, search and sat on local peers, each run with aborts on and with ``engine.aborts =
false`` (``abort()`` does nothing; the answer is the same, the speculative work is not cut),
interleaved, median of --repeat runs. Time is the run's own ``elapsed_s`` (peer start-up
excluded); spawns, messages and bytes are the run's statistics summed over its peers.

    python benchmarks/speculation.py [--repeat 3] [--peers 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

WORKLOADS = [
    ("othello", ["othello", "7", "3"]),
    ("search", ["search", "9", "4", "5", "100"]),
    ("sat", ["sat", "random", "150", "1"]),
]
COLUMNS = ["spawns", "messages", "bytes", "aborts", "abort_messages", "jobs_cancelled"]


def run(argv: list[str], peers: int, config: Path | None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "satind", "run", *argv, "--peers", str(peers), "--json"]
    if config is not None:
        cmd += ["--config", str(config)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr}")
    out: dict[str, Any] = json.loads(proc.stdout)
    if out["check"] != "ok":
        raise SystemExit(f"{' '.join(argv)}: check {out['check']}")
    return out


def row(labels: list[str], runs: list[dict[str, Any]], columns: list[str]) -> str:
    """A table row: the labels, the median time, the median of each statistic."""
    t = statistics.median(r["elapsed_s"] for r in runs)
    cells = [f"{statistics.median(r['stats'].get(c, 0) for r in runs):,.0f}" for c in columns]
    return "| " + " | ".join([*labels, f"{t:.2f}", *cells]) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--peers", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        off = Path(tmp) / "aborts-off.toml"
        off.write_text("[engine]\naborts = false\n")
        got: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for _ in range(args.repeat):
            for name, argv in WORKLOADS:
                for variant, config in (("aborts", None), ("no aborts", off)):
                    got.setdefault((name, variant), []).append(run(argv, args.peers, config))
    print(f"{args.peers} local peers, median of {args.repeat} interleaved runs\n")
    print("| workload | variant | time s | " + " | ".join(COLUMNS) + " |")
    print("|---|---|---|" + "---|" * len(COLUMNS))
    for name, argv in WORKLOADS:
        for variant in ("aborts", "no aborts"):
            print(row([" ".join(argv), variant], got[(name, variant)], COLUMNS))


if __name__ == "__main__":
    main()
