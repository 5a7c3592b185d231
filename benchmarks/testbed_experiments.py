"""The papers' multi-machine experiments on testbed machines (issue 45, point 6), like for like
with the simulator: real `satind start` daemons with the shipped defaults, one machine per
cluster, each a network namespace with its own address (satind/testbed/; needs root).

Experiments (--only; the peers are those of the sleeping tree, the raytracer runs half as
many, each with an equal share of 1.6 CPUs in all):

  two      satin-fault-tolerance Fig 4 (a) and satin-grid Fig 6: 2 clusters of 8 peers (the
           papers: 16 + 16), 1 ms one way between them; at half the fault-free time cluster
           c1 (or the master's, c0) crashes (every process of its machine SIGKILLed, its daemon
           too: nothing restarts) in naive mode ([ft] orphans = false), with orphan saving,
           with checkpoints (the shipped policy "orphans", and "tic"; each machine's own
           directory, copies on members) or leaves (`satind drain --cluster --deadline 0`);
           against 1.5 clusters (8 + 4) with no one leaving
  four     Fig 4 (b): 4 clusters of 8, 8, 4, 4 (GridLab), 10 ms; c1 crashes or leaves
  migrate  Fig 5: 3 clusters of 4, 4, 8; at half time an 8-peer cluster joins and the 8-peer
           one leaves, against no migration; 10 ms
  table6   satin-grid Table VI: 5 clusters of 4, 10 ms; CRS against RS, and with the last
           cluster's uplink throttled (100 KB/s to each other machine): stolen jobs, messages
           and bytes inside clusters and across

Workloads (--workload): `tree D B MS sleep` (--tree; leaves that sleep, so that 24 peers
share 2 CPUs: the peers stand for processors) and `raytracer W H` (--image; the papers'
application: leaves compute, each machine a CFS quota of peers x share CPUs, so that a
cluster that goes takes its CPUs with it; without quotas two CPUs would decide the result).

    flock /tmp/satind-cpu.lock python benchmarks/testbed_experiments.py --repeat 3
    flock /tmp/satind-cpu.lock python benchmarks/testbed_experiments.py --repeat 0 --sim 5
    python benchmarks/testbed_experiments.py --report   # the tables of what --out holds

Each repeat runs every variant of an experiment on fresh machines, interleaved, the
fault-free one first: its wall time sets "half time" for the others of that repeat. Time =
the submitter's wall time from the run's acceptance to its result; every answer is checked
against tests/references.py. Records go to --out (JSON lines, appended), the tables are
medians over every record there; --sim N adds the simulator's runs of the same trials (same
clusters, peers, faults, settings, shipped membership; a tree of the workload's shape, the
raytracer's leaves at the cost measured here; seeds 1..N).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shlex
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from testbed_tables import report
from testbed_trial import ROOT, Answers, Trial, Workload, in_simulator, on_testbed


def _experiments() -> dict[str, list[Trial]]:
    """Each experiment's trials, the fault-free one first; a label's first word is its key
    in the tables (testbed_tables.SECTIONS)."""
    two = partial(Trial, "two", machines=(8, 8), wide_ms=1.0)
    four = partial(Trial, "four", machines=(8, 8, 4, 4), wide_ms=10.0)
    moved = partial(Trial, "migrate", machines=(4, 4, 8), wide_ms=10.0)
    five = partial(Trial, "table6", machines=(4, 4, 4, 4, 4), wide_ms=10.0)
    crash, leave = partial(two, fault="crash"), partial(two, fault="leave")
    return {
        "two": [
            two("(0) 2 clusters, no one leaves"),
            crash("(a) crash, naive", orphans=False),
            crash("(b) crash, orphan saving"),
            leave("(c) graceful leave"),
            two("(d) 1.5 clusters, no one leaves", machines=(8, 4)),
            crash("(e) crash + checkpoints (orphans)", checkpoint="orphans"),
            crash("(f) crash + checkpoints (tic)", checkpoint="tic"),
            crash("(a') master's crash, naive", target=0, orphans=False),
            crash("(b') master's crash, orphan saving", target=0),
            crash("(e') master's crash + checkpoints (orphans)", target=0, checkpoint="orphans"),
            crash("(f') master's crash + checkpoints (tic)", target=0, checkpoint="tic"),
            leave("(c') master's cluster leaves", target=0),
        ],
        "four": [
            four("(0) 4 clusters, no one leaves"),
            four("(a) crash, naive", fault="crash", orphans=False),
            four("(b) crash, orphan saving", fault="crash"),
            four("(c) graceful leave", fault="leave"),
            four("(d) c1 at half size, no one leaves", machines=(8, 4, 4, 4)),
        ],
        "migrate": [
            moved("(0) no migration"),
            moved("(m) migration, c2 replaced", fault="migrate", target=2, joiner=8),
        ],
        "table6": [
            five("CRS"),
            five("RS", steal="rs"),
            five("CRS, c4 throttled", uplink_bps=400_000),
            five("RS, c4 throttled", steal="rs", uplink_bps=400_000),
        ],
    }


EXPERIMENTS = _experiments()
# Stats of a simulated run kept in its record, under the names a real run's stats use.
SIM_STATS = (
    "jobs_restarted",
    "tuples_sent",
    "results_reused",
    "results_from_logs",
    "stolen_local",
    "stolen_wide",
    "steal_attempts_wide",
    "redone_s",
)


def workloads(args: argparse.Namespace) -> dict[str, Workload]:
    depth, branching, leaf_ms = (int(x) for x in args.tree.split(","))
    width, height = (int(x) for x in args.image.lower().split("x"))
    tiles = math.ceil(math.log(width * height / 1024, 4))
    return {
        "tree": Workload(
            "tree",
            ("tree", str(depth), str(branching), str(leaf_ms), "sleep"),
            1.0,
            0.0,
            (depth, branching, float(leaf_ms), "fixed"),
        ),
        "raytracer": Workload(
            "raytracer",
            ("raytracer", str(width), str(height)),
            0.5,
            args.cpu_budget,
            (tiles, 4, args.tile_ms, "uniform"),
        ),
    }


def tile_ms(width: int, height: int) -> float:
    """The raytracer's mean leaf time on this machine, one CPU: every 64th tile rendered."""
    sys.path.insert(0, str(ROOT))
    from plugins import raytracer

    tiles: list[tuple[int, int, int, int]] = []

    def walk(region: tuple[int, int, int, int]) -> None:
        quads = raytracer.quadrants(*region)
        if quads is None:
            tiles.append(region)
        for quad in quads or []:
            walk(quad)

    walk((0, 0, width, height))
    sample = tiles[::64] or tiles
    began = time.perf_counter()
    for tile in sample:
        raytracer.render_tile(width, height, *tile)
    return 1000 * (time.perf_counter() - began) / len(sample)


def plan(args: argparse.Namespace, rounds: int) -> Iterator[tuple[int, Workload, str, float]]:
    """(round, workload, experiment, each peer's CPUs) in the order they run: every
    experiment of every workload in each round (a repeat, or a simulator seed)."""
    for n in range(1, rounds + 1):
        for wl in [workloads(args)[w] for w in args.workload]:
            for name in args.only:
                yield n, wl, name, wl.share(EXPERIMENTS[name][0])


def measure(args: argparse.Namespace, out: Path) -> None:
    """Run the testbed's trials, --repeat times, each experiment's variants interleaved."""
    answers = Answers()
    for rep, wl, name, share in plan(args, args.repeat):
        at: float | None = None
        for trial in EXPERIMENTS[name]:
            if trial.fault and at is None:
                continue  # no fault-free time this repeat: nothing to time it by
            began = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="satind-papers-") as tmp:
                try:
                    rec = on_testbed(trial, wl, share, at, Path(tmp), answers)
                except Exception as exc:  # recorded, and the next trial runs
                    rec = {"ok": False, "error": f"{exc!r}"[-3000:]}
                    traceback.print_exc()
            rec.update(share=round(share, 4), took_s=round(time.monotonic() - began, 1))
            save(out, "testbed", wl, trial, rep, rec)
            if trial is EXPERIMENTS[name][0] and rec.get("ok"):
                at = rec["wall_s"] / 2
            shown = f"{rec['wall_s']:.2f} s" if rec.get("ok") else "FAILED"
            print(f"repeat {rep} {wl.name} {name}: {trial.variant}: {shown}", flush=True)


def simulate(args: argparse.Namespace, out: Path) -> None:
    """The simulator's runs of the same trials, one per seed, the half time per seed."""
    logging.getLogger("satind").setLevel(logging.ERROR)
    for seed, wl, name, share in plan(args, args.sim):
        at: float | None = None
        for trial in EXPERIMENTS[name]:
            try:
                report = in_simulator(trial, wl, share, at, seed)
            except AssertionError as exc:  # the run did not end, or not with the answer
                save(out, "sim", wl, trial, seed, {"ok": False, "error": str(exc)[-3000:]})
                print(f"simulator, seed {seed}, {wl.name}: {trial.variant}: {exc}", flush=True)
                continue
            assert report.makespan_s is not None
            if trial is EXPERIMENTS[name][0]:
                at = report.makespan_s / 2
            stats = {k: getattr(report, k) for k in SIM_STATS}
            save(out, "sim", wl, trial, seed, {"ok": True, "wall_s": report.makespan_s,
                                               "stats": stats})  # fmt: skip
        print(f"simulator, seed {seed}, {wl.name} {name}: done", flush=True)


def save(out: Path, where: str, wl: Workload, trial: Trial, n: int, record: dict[str, Any]) -> None:
    """Append a trial's record to ``out``, with what it was."""
    record.update(where=where, workload=wl.name, group=trial.group, variant=trial.variant,
                  repeat=n, saved=time.strftime("%Y-%m-%d %H:%M:%S"))  # fmt: skip
    with out.open("a") as f:
        f.write(json.dumps(record) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3, help="testbed repeats (0: none)")
    parser.add_argument("--sim", type=int, default=0, metavar="N", help="simulator seeds")
    parser.add_argument(
        "--only",
        default=",".join(EXPERIMENTS),
        help=f"experiments, comma-separated ({', '.join(EXPERIMENTS)})",
    )
    parser.add_argument("--workload", default="tree,raytracer", help="tree, raytracer or both")
    parser.add_argument("--tree", default="4,8,150", help="DEPTH,BRANCHING,LEAF_MS (sleep)")
    parser.add_argument("--image", default="2048x2048", help="the raytracer's WIDTHxHEIGHT")
    parser.add_argument(
        "--cpu-budget",
        type=float,
        default=1.6,
        help="CPUs of the raytracer's machines in all (0: no quotas)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("testbed-experiments.jsonl"),
        help="records, appended (JSON lines); the tables read all of it",
    )
    parser.add_argument("--report", action="store_true", help="only print the tables")
    args = parser.parse_args()
    args.only = args.only.split(",")
    args.workload = args.workload.split(",")
    unknown = [g for g in args.only if g not in EXPERIMENTS]
    unknown += [w for w in args.workload if w not in ("tree", "raytracer")]
    if unknown:
        parser.error(f"unknown: {', '.join(unknown)}")
    args.tile_ms = 0.0
    if args.sim and "raytracer" in args.workload and not args.report:
        args.tile_ms = tile_ms(*(int(x) for x in args.image.lower().split("x")))
    print("command: python benchmarks/testbed_experiments.py " + shlex.join(sys.argv[1:]))
    began = time.monotonic()
    if not args.report:
        if args.repeat:
            measure(args, args.out)
        if args.sim:
            simulate(args, args.out)
    records = [json.loads(line) for line in args.out.read_text().splitlines() if line.strip()]
    names = {g: [t.variant for t in EXPERIMENTS[g]] for g in args.only}
    for wl in args.workload:
        report(records, wl, names)
    if args.tile_ms:
        print(f"\n(raytracer leaves in the simulator: {args.tile_ms:.1f} ms on one CPU, measured)")
    print(f"\n({time.monotonic() - began:.0f} s of wall time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
