"""Spawn/sync cost in instructions (callgrind), which this VM's wall clock cannot resolve: a
micro benchmark varies by ±30% within minutes here, an instruction count is the same for the
same run. Each row is a loop of N operations in one job on an in-process worker with a peer's
interpreter settings; the cost per operation is the difference between two sizes divided by
the extra operations, so start-up cancels out. ``--against DIR`` counts the same loops on the
satind of another checkout (a git worktree of an older commit) in the same invocation.

The count is exact for one interpreter run, but it moves with the hash seed (dict layouts: the
module globals a spawn looks up) by more than most changes to the engine: each cell is the
mean over ``--seeds`` values of PYTHONHASHSEED (0, 1, ...), with the spread beside it.

    python benchmarks/instructions.py [--against /tmp/before] [--seeds 4]
    python benchmarks/instructions.py --loop ROW N     # one loop, what callgrind runs
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROWS = {
    "spawn": "spawn + sync (no argument, no result)",
    "inlet": "spawn_inlet + sync, the child returns (no handler runs)",
    "inlet_raise": "spawn_inlet + sync, the child raises, an empty handler runs",
}


def loop(row: str, n: int) -> None:
    """N operations of ``row`` in one job on a worker (the process callgrind measures)."""
    import satind
    from satind.api import spawnable, sync
    from satind.config import EngineConfig
    from satind.engine import worker as worker_mod
    from satind.engine.frames import make_root
    from satind.engine.worker import Worker, tune_process

    # A tree from before satind/work (issue 29) keeps its jobs in the engine: --against an old
    # commit. Asked of the tree, not by trying the import (an editable install of this tree
    # would answer it).
    if (Path(satind.__file__).parent / "work" / "jobs.py").exists():
        from satind.work.jobs import RunState
    else:
        from satind.engine.jobs import RunState  # type: ignore[import-not-found,no-redef]

    class Hooks:
        def __getattr__(self, name: str) -> Any:
            return lambda *args: None

    @spawnable
    def none() -> None:
        return None

    @spawnable
    def throw() -> None:
        raise ValueError

    def handler(exc: Exception) -> None:
        return None

    def body(n: int) -> None:
        if row == "spawn":
            for _ in range(n):
                none.spawn()
                sync()
        elif row == "inlet":
            for _ in range(n):
                none.spawn_inlet(handler)
                sync()
        else:
            for _ in range(n):
                throw.spawn_inlet(handler)
                sync()

    cfg = EngineConfig()
    tune_process(cfg)
    w = Worker(cfg, Hooks())
    worker_mod.CURRENT = w
    w.run_job(make_root(body, (n,), RunState("i", "i", 0.5)))


def count(tree: Path, row: str, n: int, seed: int) -> int:
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONHASHSEED=str(seed))
    proc = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--loop",
            row,
            str(n),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from callgrind: {proc.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--against", type=Path, help="another checkout's root")
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=60_000)
    parser.add_argument("--seeds", type=int, default=4, help="hash seeds to average over")
    parser.add_argument("--loop", nargs=2, metavar=("ROW", "N"))
    args = parser.parse_args()
    if args.loop:
        loop(args.loop[0], int(args.loop[1]))
        return
    here = Path(__file__).resolve().parent.parent
    trees = [("this", here)] + ([("against", args.against)] if args.against else [])
    print(
        f"instructions per operation, ({args.large:,} - {args.small:,}) operations, "
        f"mean [min-max] over PYTHONHASHSEED 0..{args.seeds - 1}\n"
    )
    print("| operation | " + " | ".join(name for name, _ in trees) + " |")
    print("|---|" + "---|" * len(trees))
    for row, label in ROWS.items():
        cells = []
        for _, tree in trees:
            if row != "spawn" and tree != here:
                cells.append("-")  # no inlets there
                continue
            per_op = []
            for seed in range(args.seeds):
                small = count(tree, row, args.small, seed)
                large = count(tree, row, args.large, seed)
                per_op.append((large - small) / (args.large - args.small))
            mean = sum(per_op) / len(per_op)
            cells.append(f"{mean:,.0f} [{min(per_op):,.0f}-{max(per_op):,.0f}]")
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
