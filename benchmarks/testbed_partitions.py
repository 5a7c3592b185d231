"""Partitions on the testbed (issue 45, point 4): four machines of two peers in network
namespaces (satind/testbed/), README.md's set-up, the shipped defaults. Each try cuts the
system in two — the side of the first run's master (m1, m2) and the other (m3, m4) — for
--cuts seconds, with runs submitted on both sides before and during the cut, heals it, and
times how long until every peer sees every other's process alive; every answer must be
exact (tests/references.py).

    python benchmarks/testbed_partitions.py --cuts 10,60,300 --repeat 3

Needs root. Prints one line per try and a table: per cut, tries, exact, median and longest
seconds from the heal to one system. Exit 1 when a run was not exact or a heal took more than
10 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from satind.testbed import Testbed
from tests.testbed.matrix import partition_with_runs

GOAL_S = 10.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuts", default="10,60,300", help="seconds of each cut, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    cuts = [float(c) for c in args.cuts.split(",")]
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="satind-partitions-") as tmp:
        bed = Testbed.up(4, Path(tmp), peers=2)
        try:
            bed.wait_one_system(60)
            for round_ in range(args.repeat):
                for cut_s in cuts:
                    try:
                        healed = partition_with_runs(bed, ["m1", "m2"], ["m3", "m4"], cut_s)
                        row = {"cut_s": cut_s, "healed_s": round(healed, 2), "exact": True}
                    except AssertionError as exc:
                        row = {
                            "cut_s": cut_s,
                            "healed_s": None,
                            "exact": False,
                            "why": str(exc)[:1500],
                        }
                        bed.heal()
                        bed.wait_one_system(120)
                    rows.append(row)
                    print(f"[{round_ + 1}/{args.repeat}] {json.dumps(row)}", flush=True)
        finally:
            bed.down()
    print()
    print(f"python benchmarks/testbed_partitions.py --cuts {args.cuts} --repeat {args.repeat}")
    print()
    print("| cut s | tries | exact | one system after the heal, median s | longest s |")
    print("|---|---|---|---|---|")
    for cut_s in cuts:
        mine = [r for r in rows if r["cut_s"] == cut_s]
        healed = [float(r["healed_s"]) for r in mine if r["exact"]]  # type: ignore[arg-type]
        median = f"{statistics.median(healed):.1f}" if healed else "-"
        longest = f"{max(healed):.1f}" if healed else "-"
        print(f"| {cut_s:g} | {len(mine)} | {len(healed)} | {median} | {longest} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    good = all(r["exact"] and float(r["healed_s"]) < GOAL_S for r in rows)  # type: ignore[arg-type]
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
