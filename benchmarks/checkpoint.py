"""Checkpoint overhead (issue: checkpoints): `satind run` with checkpoints off, and with the
"orphans" and "tic" policies at several intervals, interleaved; medians of --repeat runs.

    python benchmarks/checkpoint.py [--repeat 5] [--run "tree 4 8 4 busy"] [--peers 2]
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


def run(argv: list[str], peers: int, config: str, tmp: Path) -> dict[str, Any]:
    cfg = tmp / "cfg.toml"
    cfg.write_text(config)
    options = ["--peers", str(peers), "--json", "--config", str(cfg)]
    proc = subprocess.run(
        [sys.executable, "-m", "satind", "run", *argv, *options],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--run", default="tree 4 8 4 busy")
    parser.add_argument("--peers", type=int, default=2)
    args = parser.parse_args()
    argv = args.run.split()
    print(f'command: python benchmarks/checkpoint.py --repeat {args.repeat} --run "{args.run}" '
          f"--peers {args.peers}\n")
    variants = {
        "off": None,
        "orphans, 10 s": ("orphans", 10.0),
        "orphans, 1 s": ("orphans", 1.0),
        "orphans, 0.1 s": ("orphans", 0.1),
        "tic, 10 s": ("tic", 10.0),
    }
    times: dict[str, list[float]] = {k: [] for k in variants}
    written: dict[str, list[float]] = {k: [] for k in variants}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for rep in range(args.repeat):
            for label, setting in variants.items():
                config = ""
                if setting is not None:
                    ckpt = tmp / f"ckpt-{rep}-{len(times[label])}-{setting[0]}-{setting[1]}"
                    config = (f'[checkpoint]\ndir = "{ckpt}"\npolicy = "{setting[0]}"\n'
                              f"interval_s = {setting[1]}\n")
                report = run(argv, args.peers, config, tmp)
                times[label].append(report["elapsed_s"])
                written[label].append(report["stats"].get("checkpoint_bytes", 0))
            print(f"repeat {rep + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()),
                  flush=True)
    base = statistics.median(times["off"])
    print("\n| checkpoints | time (s, median) | overhead | bytes written (median) |")
    print("|---|---|---|---|")
    for label in variants:
        t = statistics.median(times[label])
        print(f"| {label} | {t:.3f} | {100 * (t - base) / base:+.1f}% | "
              f"{int(statistics.median(written[label])):,} |")


if __name__ == "__main__":
    main()
