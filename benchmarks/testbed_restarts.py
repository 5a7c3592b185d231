"""Restart any machine of a testbed, many times (issue 45, point 3): four machines of two peers
in network namespaces (satind/testbed/), set up as README.md says — the first without seeds,
the others seeded with it — on 0.0.0.0:7420 with the shipped defaults. Each try picks a machine
and a way (SIGKILL of every process in it, or `satind stop`), starts it again at the same IP
with the same state directory, and times how long until every peer sees every other's current
process alive; then a short run submitted to it must be exact and see all eight peers.

    python benchmarks/testbed_restarts.py --tries 20 [--seed 1] [--json out.json]

Needs root. Prints one line per try and a table (by machine and way: tries, back within 30 s,
median and longest seconds from the start command to one system). Exit 1 when any try took
longer than 30 s or a run was not exact.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from satind.testbed import Testbed
from tests.testbed.runs import answers, submit

GOAL_S = 30.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--machines", type=int, default=4)
    parser.add_argument("--peers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="satind-restarts-") as tmp:
        bed = Testbed.up(args.machines, Path(tmp), peers=args.peers)
        try:
            bed.wait_one_system(60)
            names = list(bed.machines)
            for n in range(args.tries):
                # Every machine and both ways come up; the first machine in every fourth try.
                machine = names[0] if n % 4 == 0 else rng.choice(names)
                how = "stop" if n % 2 else "crash"
                began = time.monotonic()
                bed.restart(machine, how=how)
                started = time.monotonic()
                try:
                    back = bed.wait_one_system(120)
                    report = answers([submit(bed, machine, "fib", "27", "14")], 120)[0]
                    ok = back < GOAL_S and report["peers"] == args.machines * args.peers
                    why = "" if ok else f"peers {report['peers']}"
                except AssertionError as exc:
                    back, ok, why = float("nan"), False, str(exc)[:1500]
                row = {
                    "try": n + 1,
                    "machine": machine,
                    "how": how,
                    "down_s": round(started - began, 2),
                    "back_s": round(back, 2),
                    "ok": ok,
                    "why": why,
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
        finally:
            bed.down()
    print()
    print(f"python benchmarks/testbed_restarts.py --tries {args.tries} --seed {args.seed}")
    print()
    print("| machine | way | tries | back within 30 s | median s | longest s |")
    print("|---|---|---|---|---|---|")
    for key in sorted({(str(r["machine"]), str(r["how"])) for r in rows}):
        mine = [r for r in rows if (r["machine"], r["how"]) == key]
        good = [float(r["back_s"]) for r in mine if r["ok"]]  # type: ignore[arg-type]
        median = f"{statistics.median(good):.1f}" if good else "-"
        longest = f"{max(good):.1f}" if good else "-"
        print(f"| {key[0]} | {key[1]} | {len(mine)} | {len(good)} | {median} | {longest} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
