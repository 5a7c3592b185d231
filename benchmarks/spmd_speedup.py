"""heat2d's speed-up on 1, 2 and 4 local peers (issue 34, point 1; mpi-ios §6 runs the same
kind of stencil): `satind run heat2d ROWS COLS ITERATIONS ENTITIES --peers P`, each
configuration in turn, --repeat rounds. Each setting of `[spmd] push_every` given
(--push-every 1,10: 1 is the master pushing every entity's step every iteration, as before
issue 34; 10 is the default, holders stepping on their own between pushes) is run in the
same round, so that the ratios compare runs made side by side.

    python benchmarks/spmd_speedup.py --repeat 5

Speed-up: the median over rounds of (elapsed on 1 peer / elapsed on P peers), each ratio
within one round and one setting. On a 2-vCPU machine 4 peers share 2 CPUs: their speed-up
is bounded by 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def run(args: list[str], peers: int, config: Path) -> tuple[float, float]:
    """(elapsed_s, efficiency) of one `satind run`."""
    cmd = [sys.executable, "-m", "satind", "run", *args, "--peers", str(peers), "--json"]
    cmd += ["--no-check", "--config", str(config)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True).stdout
    report = json.loads(out)
    return float(report["elapsed_s"]), float(report.get("efficiency") or 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--peers", default="1,2,4")
    parser.add_argument("--push-every", default="1,10")
    parser.add_argument("plate", nargs="*", default=["400", "400", "200", "8"])
    ns = parser.parse_args()
    peers = [int(p) for p in ns.peers.split(",")]
    pushes = [int(p) for p in ns.push_every.split(",")]
    args = ["heat2d", *ns.plate]
    times: dict[tuple[int, int], list[float]] = {}
    effs: dict[tuple[int, int], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        configs = {}
        for push in pushes:
            configs[push] = Path(tmp) / f"push{push}.toml"
            configs[push].write_text(f"[spmd]\npush_every = {push}\n")
        for r in range(ns.repeat):
            for push in pushes:
                for p in peers:
                    elapsed, eff = run(args, p, configs[push])
                    times.setdefault((push, p), []).append(elapsed)
                    effs.setdefault((push, p), []).append(eff)
                    print(
                        f"round {r + 1} push_every {push} peers {p}: {elapsed:.2f} s",
                        file=sys.stderr,
                    )
    print(
        f"Command: `python benchmarks/spmd_speedup.py --repeat {ns.repeat} "
        f"--peers {ns.peers} --push-every {ns.push_every} {' '.join(ns.plate)}`\n"
    )
    print("| push_every | peers | elapsed s (median) | efficiency (median) | speed-up (median) |")
    print("|---|---|---|---|---|")
    base = peers[0]
    for push in pushes:
        for p in peers:
            ratios = [b / t for b, t in zip(times[(push, base)], times[(push, p)], strict=True)]
            print(
                f"| {push} | {p} | {statistics.median(times[(push, p)]):.2f} | "
                f"{statistics.median(effs[(push, p)]):.3f} | {statistics.median(ratios):.2f} |"
            )
    if len(pushes) > 1:
        first, last = pushes[0], pushes[-1]
        for p in peers:
            ratios = [a / b for a, b in zip(times[(first, p)], times[(last, p)], strict=True)]
            print(f"\npush_every {first} / {last} on {p} peers: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
