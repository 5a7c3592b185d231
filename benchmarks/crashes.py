"""Every built-in plugin under "SIGKILL the master" and "SIGKILL a thief, then the master", on
two real daemons with the shipped defaults (the daemons restart the killed peers), many times;
each answer compared with an independent reference (tests/references.py). CI runs each kind
once (tests/integration/test_crash_procs.py); this runs all of them, --repeat times.

With --testbed, the crash matrix on a testbed instead (tests/testbed/matrix.py; needs root):
four machines of two peers, network namespaces with their own addresses running `satind
start` with the shipped defaults, and every plugin under each machine fault — SIGKILL of a
peer, of the master, of a machine, of the master's machine, a `satind stop`, a paused master,
a partitioned master, a drain with a deadline — mid-run. A run is submitted to the master's
machine, alternately m2 and m1 (the first machine, every other's seed); the fault comes
TESTBED_RUNS' seconds later, and a run that ended before it is counted as such, not as exact.
CI runs each fault once (tests/testbed/test_matrix.py).

    python benchmarks/crashes.py --repeat 10            # every case, 10 times (about 1.5 h)
    python benchmarks/crashes.py --only tsp,heat2d --repeat 3 --json out.json
    flock /tmp/satind-cpu.lock python benchmarks/crashes.py --testbed --repeat 2

It prints one line per run and a table: per case, runs exact / failed / ended before the kill
or fault, the median and the longest time from the last kill (the fault's end) to the answer.
Exit 1 if any run was not exact.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integration.crashes import PLUGIN_RUNS, cases, run_case, two_machines

if TYPE_CHECKING:
    from satind.testbed import Testbed

Row = dict[str, Any]

# Each plugin's run on the testbed and the seconds after its submission when the fault comes,
# mid-run on four machines of two peers sharing this project's two cores. Measured there
# without a fault, from the submission to the run's end: 7.5-10 s (fault at 3 s: othello,
# kmeans, barneshut; at 4 s: fib, nqueens, tree), 11-17 s (heat2d, raytracer, search, sat,
# knapsack), 26 s (tsp). Larger than the loopback sizes (tests/integration/crashes.py): eight
# peers share the CPUs here, and the fault comes at a time, not after CPU seconds.
TESTBED_RUNS: dict[str, tuple[tuple[str, ...], float]] = {
    "fib": (("fib", "39", "18"), 4.0),
    "nqueens": (("nqueens", "14"), 4.0),
    "tree": (("tree", "3", "8", "120", "busy"), 4.0),
    "raytracer": (("raytracer", "1200", "900"), 4.0),
    "sat": (("sat", "random", "140", "12"), 4.0),
    "search": (("search", "6", "6", "3", "800"), 4.0),
    "othello": (("othello", "8", "2"), 3.0),
    "tsp": (("tsp", "17", "1", "shared"), 4.0),
    "knapsack": (("knapsack", "100", "3", "shared"), 4.0),
    "barneshut": (("barneshut", "6000", "8", "1", "shared"), 3.0),
    "kmeans": (("kmeans", "200000", "6", "12", "3", "40"), 3.0),
    "heat2d": (("heat2d", "240", "240", "300", "8"), 4.0),
}


def loopback_runs(args: argparse.Namespace, chosen: list[str]) -> Iterator[tuple[str, Row]]:
    """Each of tests/integration/crashes.py's cases, --repeat times, on two loopback daemons."""
    picked = [c for c in cases() if c.argv[0] in chosen]
    with tempfile.TemporaryDirectory(prefix="satind-crashes-") as tmp:
        keys = Path(tmp) / "keys"
        keys.mkdir()
        with two_machines(keys) as machines:
            for round_ in range(args.repeat):
                for case in picked:
                    yield (
                        f"{round_ + 1}/{args.repeat}",
                        timed(
                            case.name,
                            partial(run_case, keys, machines, case),
                            lambda outcome: {
                                "after_kill_s": outcome.after_kill_s,
                                "wall_s": outcome.wall_s,
                                "check": outcome.report["check"],
                            },
                        ),
                    )


def testbed_runs(args: argparse.Namespace, chosen: list[str]) -> Iterator[tuple[str, Row]]:
    """Each plugin under each fault of tests/testbed/matrix.py, --repeat times, on a testbed
    kept for the whole benchmark (its directory, with the daemon logs, is kept too)."""
    from satind.testbed import Testbed, unavailable
    from tests.testbed.matrix import FAULTS, Where, run_fault

    why = unavailable()
    if why:
        raise SystemExit(f"no testbed here: {why}")
    faults = [f for f in FAULTS if not args.faults or f in args.faults.split(",")]
    if not faults:
        raise SystemExit(f"no fault for --faults {args.faults!r}; there are {', '.join(FAULTS)}")
    root = Path(tempfile.mkdtemp(prefix="satind-crashes-testbed-"))
    print(f"testbed and daemon logs in {root}", flush=True)
    # m2: a machine seeded with m1; m1: the first machine, every other one's seed.
    wheres = (Where("m2", "m3"), Where("m1", "m4"))
    bed = Testbed.up(4, root, peers=2)
    try:
        for round_ in range(args.repeat):
            at = wheres[round_ % len(wheres)]
            for name in chosen:
                argv, after_s = TESTBED_RUNS[name]
                for fault in faults:
                    row = timed(
                        f"{name}-{fault}",
                        partial(run_fault, bed, fault, argv, at, after_s),
                        lambda outcome: {
                            "after_fault_s": outcome.after_fault_s,
                            "wall_s": outcome.wall_s,
                            "check": outcome.report["check"],
                        },
                    )
                    yield f"{round_ + 1}/{args.repeat}", row | {"master": at.master}
                    repair(bed)
    finally:
        bed.down()


def repair(bed: Testbed) -> None:
    """Start again a machine a fault left down (its start failed), so that one failure does
    not fail every run after it."""
    for name, machine in bed.machines.items():
        if machine.daemon is None or machine.daemon.poll() is not None:
            print(f"  {name} was down after the fault: started again", flush=True)
            bed.crash(name)
            bed.start(name)


def timed(case: str, run: Callable[[], Any], fields: Callable[[Any], Row]) -> Row:
    """One run: exact (with ``fields`` of its outcome), ended before the fault, or failed."""
    started = time.monotonic()
    try:
        outcome = run()
    except AssertionError as exc:
        why = str(exc)
        early = "ended before the" in why  # the kill (loopback), the fault (testbed)
        return {
            "case": case,
            "ok": False,
            "early": early,
            "why": why[:2000],
            "wall_s": round(time.monotonic() - started, 2),
        }
    row = {"case": case, "ok": True, "early": False} | fields(outcome)
    return row | {k: round(v, 2) for k, v in row.items() if isinstance(v, float)}


def table(rows: list[Row], testbed: bool) -> list[str]:
    """Per case: exact, failed, ended before the kill or fault, and the median and longest
    seconds from the last kill (the fault's end) to the answer."""
    key, what, since = (
        ("after_fault_s", "the fault", "the fault's end")
        if testbed
        else ("after_kill_s", "the kill", "the last kill")
    )
    out = [
        f"| case | exact | failed | ended before {what} | after {since}, median s | longest s |",
        "|---|---|---|---|---|---|",
    ]
    for case in dict.fromkeys(r["case"] for r in rows):
        mine = [r for r in rows if r["case"] == case]
        good = [float(r[key]) for r in mine if r["ok"]]
        early = sum(r["early"] for r in mine)
        median = f"{statistics.median(good):.1f}" if good else "-"
        longest = f"{max(good):.1f}" if good else "-"
        out.append(
            f"| {case} | {len(good)} | {len(mine) - len(good) - early} | {early} | {median} "
            f"| {longest} |"
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10, help="runs of each case (10)")
    parser.add_argument("--only", default="", help="plugins to run, comma-separated (all)")
    parser.add_argument(
        "--testbed", action="store_true", help="the machine faults on a testbed (needs root)"
    )
    parser.add_argument(
        "--faults", default="", help="with --testbed: faults to apply, comma-separated (all)"
    )
    parser.add_argument("--json", type=Path, help="also write every run's outcome here")
    args = parser.parse_args()
    chosen = [name for name in PLUGIN_RUNS if not args.only or name in args.only.split(",")]
    if not chosen:
        parser.error(f"no case for --only {args.only!r}")
    runs = testbed_runs if args.testbed else loopback_runs
    rows: list[Row] = []
    for label, row in runs(args, chosen):
        rows.append(row)
        print(f"[{label}] {json.dumps(row)}", flush=True)
    print()
    print("\n".join(table(rows, args.testbed)))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
