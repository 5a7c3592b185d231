"""The shape of the Satin paper's Figure 8 (satin-grid-programming-model §5.6) in the
simulator: the same run with and without the self-adaptivity coordinator in six scenarios
(configs/scenarios/adapt-s0.toml ... adapt-s5.toml: 36 peers in 3 clusters and a standby
cluster of 12), the run times side by side with the paper's reductions, and a plot in
docs/adapt-fig8.png.

    python benchmarks/adaptivity.py [--seeds 1] [--jobs 2] [--only s3]
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
import tomllib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from plotting import has_matplotlib  # the scripts' directory: python benchmarks/...

from satind.sim.scenario import parse
from satind.sim.simulator import Simulation

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("s0", "s1", "s2", "s3", "s4", "s5")
# Figure 8 as the text of §5.6 gives it: the run time with adaptivity against without.
PAPER = {
    "s0": "+15% (the overhead: statistics and benchmarking)",
    "s1": "-50%",
    "s2": "-14%",
    "s3": "-60%",
    "s4": "-30%",
    "s5": "-13%",
}


def one(key: str, seed: int, adapt: bool) -> dict[str, object]:
    data = tomllib.loads((ROOT / "configs" / "scenarios" / f"adapt-{key}.toml").read_text())
    data["seed"] = seed
    data["config"]["adapt"]["enabled"] = adapt
    sim = Simulation(parse(data))
    report = sim.run()
    made = [d for p in sim.peers.values() for d in p.coordinator.decisions]
    return {
        "key": key,
        "seed": seed,
        "adapt": adapt,
        "makespan_s": report.makespan_s,
        "exact": report.result_ok,
        "invariants": report.invariants_ok,
        "wall_s": report.wall_s,
        "admitted": sum(len(d.admitted) for d in made),
        "drained": sum(len(d.decision.drain) for d in made),
        "clusters_drained": sorted({d.decision.drain_cluster for d in made} - {""}),
        "peers": [(round(d.at), d.peers, round(d.decision.wa_efficiency, 2)) for d in made],
    }


def plot(rows: dict[tuple[str, bool], list[dict[str, object]]], out: Path) -> None:
    if not has_matplotlib():
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.6))
    xs = range(len(SCENARIOS))
    for offset, adapt, label in ((-0.2, False, "no adaptivity"), (0.2, True, "adaptivity")):
        heights = [
            statistics.median(float(r["makespan_s"]) for r in rows[(k, adapt)])  # type: ignore[arg-type]
            for k in SCENARIOS
        ]
        ax.bar([x + offset for x in xs], heights, width=0.4, label=label)
    ax.set_xticks(list(xs), [k.upper() for k in SCENARIOS])
    ax.set_ylabel("run time (virtual s)")
    ax.set_title("Self-adaptivity in the simulator (the shape of Satin's Fig. 8)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"plot: {out}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=1, help="seeds 1..N per scenario")
    parser.add_argument("--jobs", type=int, default=2, help="processes")
    parser.add_argument("--only", action="append", choices=SCENARIOS, help="these scenarios")
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args()
    print("command: python benchmarks/adaptivity.py " + shlex.join(sys.argv[1:]) + "\n")
    keys = args.only or list(SCENARIOS)
    tasks = [(k, s, a) for k in keys for s in range(1, args.seeds + 1) for a in (False, True)]
    started = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(one, *zip(*tasks, strict=True)))
    rows: dict[tuple[str, bool], list[dict[str, object]]] = {}
    for r in results:
        rows.setdefault((str(r["key"]), bool(r["adapt"])), []).append(r)
    print(f"{len(tasks)} runs, {time.perf_counter() - started:.0f} s wall\n")
    print(
        "| scenario | without (s) | with (s) | change | paper | admitted | drained | "
        "clusters drained | answers exact | invariants (without / with) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k in keys:
        off = statistics.median(float(r["makespan_s"]) for r in rows[(k, False)])  # type: ignore[arg-type]
        on = statistics.median(float(r["makespan_s"]) for r in rows[(k, True)])  # type: ignore[arg-type]
        adaptive = rows[(k, True)]
        exact = all(r["exact"] for r in rows[(k, False)] + adaptive)
        held = " / ".join(
            "held" if all(r["invariants"] for r in rows[(k, a)]) else "VIOLATED"
            for a in (False, True)
        )
        print(
            f"| {k.upper()} | {off:.1f} | {on:.1f} | {(on - off) / off:+.0%} | {PAPER[k]} | "
            f"{statistics.median(int(r['admitted']) for r in adaptive):.0f} | "  # type: ignore[call-overload]
            f"{statistics.median(int(r['drained']) for r in adaptive):.0f} | "  # type: ignore[call-overload]
            f"{', '.join(sorted({c for r in adaptive for c in r['clusters_drained']})) or '-'} | "  # type: ignore[attr-defined]
            f"{'yes' if exact else 'NO'} | {held} |"
        )
    print("\nperiods of the first seed (virtual s, peers counted, wa_efficiency):\n")
    for k in keys:
        print(f"- {k.upper()}: {rows[(k, True)][0]['peers']}")
    if not args.no_plot and set(keys) == set(SCENARIOS):
        plot(rows, ROOT / "docs" / "adapt-fig8.png")


if __name__ == "__main__":
    main()
