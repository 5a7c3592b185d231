"""Every built-in plugin under "SIGKILL the master" and "SIGKILL a thief, then the master", on
two real daemons with the shipped defaults (the daemons restart the killed peers), many times;
each answer compared with an independent reference (tests/references.py). CI runs each kind
once (tests/integration/test_crash_procs.py); this runs all of them, --repeat times.

    python benchmarks/crashes.py --repeat 10            # every case, 10 times (about 1.5 h)
    python benchmarks/crashes.py --only tsp,heat2d --repeat 3 --json out.json

It prints one line per run and a table: per case, runs exact / failed, the median and the
longest time from the last kill to the answer. Exit 1 if any run was not exact.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integration.crashes import cases, run_case, two_machines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10, help="runs of each case (10)")
    parser.add_argument("--only", default="", help="plugins to run, comma-separated (all)")
    parser.add_argument("--json", type=Path, help="also write every run's outcome here")
    args = parser.parse_args()
    chosen = [c for c in cases() if not args.only or c.argv[0] in args.only.split(",")]
    if not chosen:
        parser.error(f"no case for --only {args.only!r}")
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="satind-crashes-") as tmp:
        keys = Path(tmp) / "keys"
        keys.mkdir()
        with two_machines(keys) as machines:
            for round_ in range(args.repeat):
                for case in chosen:
                    started = time.monotonic()
                    try:
                        outcome = run_case(keys, machines, case)
                        row = {
                            "case": case.name,
                            "ok": True,
                            "after_kill_s": round(outcome.after_kill_s, 2),
                            "wall_s": round(outcome.wall_s, 2),
                            "check": outcome.report["check"],
                        }
                    except AssertionError as exc:
                        row = {
                            "case": case.name,
                            "ok": False,
                            "why": str(exc)[:2000],
                            "wall_s": round(time.monotonic() - started, 2),
                        }
                    rows.append(row)
                    print(f"[{round_ + 1}/{args.repeat}] {json.dumps(row)}", flush=True)
    print()
    print("| case | exact | failed | after the last kill, median s | longest s |")
    print("|---|---|---|---|---|")
    for case in chosen:
        mine = [r for r in rows if r["case"] == case.name]
        good = [float(r["after_kill_s"]) for r in mine if r["ok"]]  # type: ignore[arg-type]
        median = f"{statistics.median(good):.1f}" if good else "-"
        longest = f"{max(good):.1f}" if good else "-"
        print(f"| {case.name} | {len(good)} | {len(mine) - len(good)} | {median} | {longest} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
