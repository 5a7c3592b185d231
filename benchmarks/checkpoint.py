"""Checkpoint overhead (issue 6): `satind run` on local peers with checkpoints off and with each
policy at several intervals, interleaved; medians of --repeat runs.

    python benchmarks/checkpoint.py [--repeat 3] [--run "tree 4 8 4 busy"] [--peers 4]
        overhead by policy and interval on one workload

    python benchmarks/checkpoint.py --sel [--repeat 5] [--peers 2]
        what "sel" (every completion logged as it happens) costs per task, fsync on and off

    python benchmarks/checkpoint.py --tasks [--repeat 3] [--peers 2] [--work-s 6]
        overhead against the number of tasks, the total work held constant (the shape of
        KAAPI's Figure 2: logging every completion costs more as tasks get more numerous;
        theft-induced checkpoints cost less with a longer period); plot in
        docs/checkpoint-tasks.png
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from plotting import has_matplotlib  # the scripts' directory: python benchmarks/...

DOCS = Path(__file__).resolve().parent.parent / "docs"

# label -> (policy, interval_s[, fsync]), None: checkpoints off
BY_INTERVAL: dict[str, tuple[str, float] | tuple[str, float, bool] | None] = {
    "off": None,
    "orphans, 10 s": ("orphans", 10.0),
    "orphans, 1 s": ("orphans", 1.0),
    "orphans, 0.1 s": ("orphans", 0.1),
    "tic, 10 s": ("tic", 10.0),
    "tic, 1 s": ("tic", 1.0),
    "sel, 10 s": ("sel", 10.0),
    "sel, 1 s": ("sel", 1.0),
}
BY_SEL: dict[str, tuple[str, float] | tuple[str, float, bool] | None] = {
    "off": None,
    "sel, fsync": ("sel", 10.0, True),
    "sel, no fsync": ("sel", 10.0, False),
}
BY_TASKS: dict[str, tuple[str, float] | tuple[str, float, bool] | None] = {
    "off": None,
    "orphans, 10 s": ("orphans", 10.0),
    "tic, 1 s": ("tic", 1.0),
    "tic, 10 s": ("tic", 10.0),
    "sel, 1 s": ("sel", 1.0),
    "sel, 10 s": ("sel", 10.0),
}


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


def measure(
    argv: list[str],
    peers: int,
    repeat: int,
    variants: dict[str, tuple[str, float] | tuple[str, float, bool] | None],
    tmp: Path,
) -> dict[str, tuple[float, float]]:
    """label -> (median time, median bytes written); the variants interleaved per repeat."""
    times: dict[str, list[float]] = {k: [] for k in variants}
    written: dict[str, list[float]] = {k: [] for k in variants}
    for rep in range(repeat):
        for label, setting in variants.items():
            config = ""
            if setting is not None:
                ckpt = tmp / f"ckpt-{len(list(tmp.iterdir()))}"
                fsync = "true" if len(setting) < 3 or setting[2] else "false"
                config = (
                    f'[checkpoint]\ndir = "{ckpt}"\npolicy = "{setting[0]}"\n'
                    f"interval_s = {setting[1]}\nfsync = {fsync}\n"
                )
            report = run(argv, peers, config, tmp)
            times[label].append(report["elapsed_s"])
            written[label].append(report["stats"].get("checkpoint_bytes", 0))
        print(
            f"  {' '.join(argv)}, repeat {rep + 1}: "
            + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()),
            flush=True,
        )
    return {k: (statistics.median(times[k]), statistics.median(written[k])) for k in variants}


def by_interval(args: argparse.Namespace, tmp: Path) -> None:
    argv = args.run.split()
    result = measure(argv, args.peers, args.repeat, BY_INTERVAL, tmp)
    base = result["off"][0]
    print("\n| checkpoints | time (s, median) | overhead | bytes written (median) |")
    print("|---|---|---|---|")
    for label, (t, b) in result.items():
        print(f"| {label} | {t:.3f} | {100 * (t - base) / base:+.1f}% | {int(b):,} |")


def by_sel(args: argparse.Namespace, tmp: Path) -> None:
    print("\n| leaves | leaf (ms) | off (s) | sel, fsync: per task | sel, no fsync: per task |")
    print("|---|---|---|---|---|")
    for depth in (6, 7):
        leaves = 4**depth
        # Jobs logged: every job of the tree, leaves and inner ones (4/3 of the leaves).
        jobs = (4 ** (depth + 1) - 1) // 3
        leaf_ms = 1000 * args.work_s * args.peers / leaves
        argv = ["tree", str(depth), "4", f"{leaf_ms:.4f}", "busy"]
        result = measure(argv, args.peers, args.repeat, BY_SEL, tmp)
        base = result["off"][0]
        cells = [
            f"{1e6 * (result[k][0] - base) / jobs:+.1f} µs ({result[k][1] / 1e3:,.0f} KB)"
            for k in ("sel, fsync", "sel, no fsync")
        ]
        print(f"| {leaves:,} | {leaf_ms:.2f} | {base:.2f} | " + " | ".join(cells) + " |")


def by_tasks(args: argparse.Namespace, tmp: Path) -> None:
    # Branching 4, depth 3..7: 64 to 16,384 leaves, each leaf the same share of --work-s.
    rows: list[tuple[int, dict[str, tuple[float, float]]]] = []
    for depth in range(3, 8):
        leaves = 4**depth
        leaf_ms = 1000 * args.work_s * args.peers / leaves
        argv = ["tree", str(depth), "4", f"{leaf_ms:.4f}", "busy"]
        rows.append((leaves, measure(argv, args.peers, args.repeat, BY_TASKS, tmp)))
    labels = [k for k in BY_TASKS if k != "off"]
    print("\n| leaves | leaf (ms) | off (s) | " + " | ".join(labels) + " |")
    print("|---" * (3 + len(labels)) + "|")
    for leaves, result in rows:
        base = result["off"][0]
        cells = [
            f"{100 * (result[k][0] - base) / base:+.1f}% ({result[k][1] / 1e3:,.0f} KB)"
            for k in labels
        ]
        leaf_ms = 1000 * args.work_s * args.peers / leaves
        print(f"| {leaves:,} | {leaf_ms:.2f} | {base:.2f} | " + " | ".join(cells) + " |")
    plot(rows, labels, DOCS / "checkpoint-tasks.png")


def plot(
    rows: list[tuple[int, dict[str, tuple[float, float]]]], labels: list[str], out: Path
) -> None:
    if not has_matplotlib():
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    xs = [leaves for leaves, _ in rows]
    for label in labels:
        ys = [100 * (r[label][0] - r["off"][0]) / r["off"][0] for _, r in rows]
        ax.plot(xs, ys, marker="o", label=label)
    ax.axhline(0, color="grey", linewidth=0.5)
    ax.set_xscale("log")
    ax.set_xlabel("tasks (leaves of the tree; total work constant)")
    ax.set_ylabel("overhead vs checkpoints off (%)")
    ax.set_title("Checkpoint overhead against the number of tasks")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"plot: {out}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--run", default="tree 4 8 4 busy")
    parser.add_argument("--peers", type=int, default=None)
    parser.add_argument("--tasks", action="store_true", help="sweep the number of tasks")
    parser.add_argument("--sel", action="store_true", help="sel's cost per task, fsync on/off")
    parser.add_argument("--work-s", type=float, default=6.0, help="--tasks: seconds per peer")
    args = parser.parse_args()
    if args.peers is None:
        args.peers = 2
    print("command: python benchmarks/checkpoint.py " + shlex.join(sys.argv[1:]) + "\n")
    with tempfile.TemporaryDirectory() as tmp_name:
        mode = by_tasks if args.tasks else by_sel if args.sel else by_interval
        mode(args, Path(tmp_name))


if __name__ == "__main__":
    main()
