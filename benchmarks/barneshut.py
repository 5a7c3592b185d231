"""Barnes-Hut with the bodies passed as arguments (``plain``) against the bodies as a shared
object (``shared``): the paper's Table IV rows (satin-grid-programming-model §5.2.1). Each
variant on 2 and 4 local peers, interleaved, median of --repeat runs; the sequential time is
the plugin called in this process without satind (no spawn costs anything). Efficiency is
sequential time / (peers x run time). Bytes and messages are the run's statistics.

    cd benchmarks && python barneshut.py [--bodies 3000 --steps 4 --repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from satind_plugins import barneshut
from speculation import run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bodies", type=int, default=3000)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    argv = ["barneshut", str(args.bodies), str(args.steps), "1"]
    seq: list[float] = []
    got: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for _ in range(args.repeat):
        start = time.perf_counter()
        barneshut.simulate(*barneshut.parse(argv[1:]))
        seq.append(time.perf_counter() - start)
        for peers in (2, 4):
            for variant in ("plain", "shared"):
                got.setdefault((variant, peers), []).append(run([*argv, variant], peers, None))
    t_seq = statistics.median(seq)
    print(
        f"barneshut {args.bodies} bodies, {args.steps} steps; sequential {t_seq:.2f} s; "
        f"median of {args.repeat} interleaved runs\n"
    )
    print("| variant | peers | time s | efficiency | messages | bytes |")
    print("|---|---|---|---|---|---|")
    for peers in (2, 4):
        for variant in ("plain", "shared"):
            runs = got[(variant, peers)]
            t = statistics.median(r["elapsed_s"] for r in runs)
            msgs = statistics.median(r["stats"]["messages"] for r in runs)
            data = statistics.median(r["stats"]["bytes"] for r in runs)
            print(
                f"| {variant} | {peers} | {t:.2f} | {t_seq / (peers * t):.2f} | "
                f"{msgs:,.0f} | {data:,.0f} |"
            )


if __name__ == "__main__":
    main()
