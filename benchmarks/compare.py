"""satind against Ray, Dask distributed, a process pool and sequential Python (issue 7).

    python benchmarks/compare.py [--repeat 3] [--workers 2] [--quick] [--part all]

Parts (``--part``, default all; each prints a markdown table and writes a plot into docs/):

- ``systems``: the same workloads (fib at fine and coarse grain, nqueens, knapsack, raytracer,
  a flat bag of equal tasks) on every system with ``--workers`` workers; time after the system
  is up (start-up reported apart), ratio to satind and whether the answer is the sequential
  one. Each system is started once (start-up timed) and runs every workload once untimed (the
  warm-up, reported); then --repeat repetitions, each running every workload on every system
  in turn (interleaved), with each system's speed-up over sequential. docs/compare.png
- ``widearea``: CRS against RS on 2 clusters x 4 peers with emulated wide-area latency (0, 10
  and 50 ms one way) and sleeping tree leaves: runtime, local and wide-area stolen jobs and
  messages (the shape of the Satin paper's Table VI). docs/widearea.png
- ``micro``: spawn/sync costs in the form of the Satin paper's Table III.

Ray, Dask and matplotlib come from the ``bench`` extra: pip install -e '.[bench]'. Without
matplotlib the tables are printed and no plot is made.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DOCS = ROOT / "docs"
# The systems' worker processes import workloads/systems from here.
sys.path.insert(0, str(HERE))
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p
)

from plotting import has_matplotlib  # noqa: E402
from systems import SYSTEMS  # noqa: E402
from workloads import Workload, workloads  # noqa: E402


def machine() -> str:
    cpus = len(os.sched_getaffinity(0))
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{platform.processor() or platform.machine()}, {cpus} cores, {mem:.0f} GB, "
        f"Linux {platform.release()}, Python {platform.python_version()}"
    )


def satind_run(argv: list[str], peers: int, extra: list[str] | None = None) -> dict[str, Any]:
    """`satind run ... --json`; adds ``wall_s`` (process start to exit)."""
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "satind", "run", *argv, "--peers", str(peers), "--json"]
        + (extra or []),
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=ROOT,
    )
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"satind run {' '.join(argv)} failed: {proc.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(proc.stdout)
    out["wall_s"] = wall
    return out


# -- systems -----------------------------------------------------------------------------------


def part_systems(args: argparse.Namespace) -> None:
    """Every system started once (start-up timed) and warmed up (each workload once, untimed);
    then the repetitions **interleaved**: in each, every workload on every system in turn,
    satind first, so that drift of the machine (another job starting, the CPU's clock) lands on
    all systems alike instead of on whichever ran in that phase. The systems stay up, idle,
    while the others run."""
    rows = workloads(args.quick)
    # satind again with another configuration, interleaved as a system of its own.
    variants = {f"satind[{Path(c).stem}]": str(c) for c in args.satind_config or []}
    names = ["satind", *variants, *args.systems]
    times: dict[tuple[str, str], list[float]] = {}
    startup: dict[str, list[float]] = {n: [] for n in names}
    answers: dict[tuple[str, str], Any] = {}
    first: dict[tuple[str, str], float] = {}
    efficiency: dict[str, list[float]] = {}
    started: dict[str, Any] = {}
    try:
        for name in args.systems:
            system = SYSTEMS[name](args.workers)
            t = time.perf_counter()
            system.start()
            startup[name].append(time.perf_counter() - t)
            started[name] = system
            # One untimed run of each workload first: Ray starts a worker process for every
            # task that waits in ray.get, and the first run would measure those start-ups.
            for w in rows:
                t = time.perf_counter()
                answers[(name, w.label)] = w.answer(system.solve(w))
                first[(name, w.label)] = time.perf_counter() - t
            print(f"  {name} up", flush=True)
        for rep in range(args.repeat):
            for w in rows:
                # Each `satind run` starts its own peers: nothing to warm up, start-up
                # measured on every run.
                report = satind_run(list(w.argv), args.workers)
                times.setdefault(("satind", w.label), []).append(report["elapsed_s"])
                efficiency.setdefault(w.label, []).append(report.get("efficiency") or 0.0)
                startup["satind"].append(report["wall_s"] - report["elapsed_s"])
                answers[("satind", w.label)] = report["result"]
                for name, config in variants.items():
                    report = satind_run(list(w.argv), args.workers, ["--config", config])
                    times.setdefault((name, w.label), []).append(report["elapsed_s"])
                    startup[name].append(report["wall_s"] - report["elapsed_s"])
                    answers[(name, w.label)] = report["result"]
                for name, system in started.items():
                    t = time.perf_counter()
                    value = system.solve(w)
                    times.setdefault((name, w.label), []).append(time.perf_counter() - t)
                    if w.answer(value) != answers[(name, w.label)]:
                        answers[(name, w.label)] = "differs between runs"
            print(f"  repetition {rep + 1} of {args.repeat} done", flush=True)
    finally:
        for system in started.values():
            system.stop()

    def med(name: str, w: Workload) -> float:
        return statistics.median(times[(name, w.label)])

    reference = "sequential" if "sequential" in names else "satind"
    print(
        f"\n{args.workers} workers each; medians of {args.repeat}, the systems interleaved in "
        "each repetition; time after start-up and warm-up (s); x: time relative to satind "
        "(above 1: slower than satind)\n"
    )
    print("| workload | " + " | ".join(names) + " | same answer |")
    print("|---" * (len(names) + 2) + "|")
    for w in rows:
        base = med("satind", w)
        cells = [f"{base:.3f}"] + [f"{med(n, w):.3f} ({med(n, w) / base:.2f}x)" for n in names[1:]]
        ref = answers[(reference, w.label)]
        same = all(answers[(n, w.label)] == ref for n in names)
        wrong = [n for n in names if answers[(n, w.label)] != ref]
        print(
            f"| {w.label} | "
            + " | ".join(cells)
            + f" | {'yes' if same else 'NO: ' + ', '.join(wrong)} |"
        )
    if "sequential" in names:
        parallel = [n for n in names if n != "sequential"]
        print(f"\nSpeed-up over sequential Python on {args.workers} workers (medians):\n")
        print("| workload | " + " | ".join(parallel) + " |")
        print("|---" * (len(parallel) + 1) + "|")
        for w in rows:
            seq = med("sequential", w)
            print(f"| {w.label} | " + " | ".join(f"{seq / med(n, w):.2f}" for n in parallel) + " |")
    print(
        "\nsatind's efficiency from its peers' own accounting (busy / (peers x elapsed)), "
        "median, and its speed-up over sequential divided by the workers:\n"
    )
    print("| workload | efficiency (accounting) | speed-up / workers |")
    print("|---|---|---|")
    for w in rows:
        speedup = (
            f"{med('sequential', w) / med('satind', w) / args.workers:.3f}"
            if "sequential" in names
            else "-"
        )
        print(f"| {w.label} | {statistics.median(efficiency[w.label]):.3f} | {speedup} |")
    print("\nThe first (untimed) run of each workload, after start-up (s):\n")
    print("| workload | " + " | ".join(args.systems) + " |")
    print("|---" * (len(args.systems) + 1) + "|")
    for w in rows:
        print(
            f"| {w.label} | "
            + " | ".join(f"{first[(n, w.label)]:.3f}" for n in args.systems)
            + " |"
        )
    print("\n| system | start-up (s, median) |")
    print("|---|---|")
    for n in names:
        note = (
            " (`satind run` wall time less the run's elapsed: peers, keys, TLS)"
            if n == "satind"
            else ""
        )
        print(f"| {n} | {statistics.median(startup[n]):.2f}{note} |")
    if has_matplotlib():
        plot_systems(rows, names, med)


def plot_systems(rows: list[Workload], names: list[str], med: Any) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        ys = [med(name, w) / med("satind", w) for w in rows]
        ax.bar([x + i * width for x in range(len(rows))], ys, width, label=name)
    ax.set_yscale("log")
    ax.axhline(1, color="grey", linewidth=0.5)
    ax.set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(rows))])
    labels = [w.label.replace(", ", "\n", 1).replace(" (", "\n(", 1) for w in rows]
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("time relative to satind (log)")
    ax.set_title("Same workloads and workers (lower is faster)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = DOCS / "compare.png"
    fig.savefig(out, dpi=110)
    print(f"\nplot: {out}")


# -- CRS vs RS under emulated wide-area latency ------------------------------------------------


def part_widearea(args: argparse.Namespace) -> None:
    argv = (
        ["tree", "4", "6", "20", "sleep"] if not args.quick else ["tree", "3", "6", "20", "sleep"]
    )
    latencies = (0.0, 10.0, 50.0)
    results: dict[tuple[str, float], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeat):
            for latency in latencies:
                cfg = Path(tmp) / f"wide-{latency:g}.toml"
                cfg.write_text(
                    f"[emulation]\nlatency_ms = {latency}\nbandwidth_mbps = 100.0\n\n"
                    "[steal]\nwide_request_timeout_s = 10.0\n"
                )
                for algorithm in ("crs", "rs"):
                    report = satind_run(
                        argv,
                        8,
                        ["--clusters", "2", "--steal", algorithm, "--config", str(cfg)],
                    )
                    if report["check"] != "ok":
                        raise RuntimeError(f"wrong answer: {report['check']}")
                    results.setdefault((algorithm, latency), []).append(report)
            print(f"  repeat {rep + 1} of {args.repeat} done", flush=True)

    def med(algorithm: str, latency: float, key: str) -> float:
        reports = results[(algorithm, latency)]
        if key == "elapsed_s":
            return statistics.median(r["elapsed_s"] for r in reports)
        return statistics.median(float(r["stats"].get(key, 0)) for r in reports)

    print(f"\n`satind run {' '.join(argv)} --peers 8 --clusters 2`; medians of {args.repeat}\n")
    print(
        "| algorithm | one-way latency | runtime (s) | vs 0 ms | local: jobs stolen | messages "
        "| data | wide-area: jobs stolen | messages | data | wide steal attempts |"
    )
    print("|---" * 11 + "|")
    for algorithm in ("crs", "rs"):
        for latency in latencies:
            t = med(algorithm, latency, "elapsed_s")
            base = med(algorithm, 0.0, "elapsed_s")
            wide_msgs = med(algorithm, latency, "messages_wide")
            wide_bytes = med(algorithm, latency, "bytes_wide")
            print(
                f"| {algorithm.upper()} | {latency:g} ms | {t:.2f} | "
                f"{100 * (t - base) / base:+.1f}% | "
                f"{med(algorithm, latency, 'stolen_local'):.0f} | "
                f"{med(algorithm, latency, 'messages') - wide_msgs:,.0f} | "
                f"{(med(algorithm, latency, 'bytes') - wide_bytes) / 1e3:,.0f} KB | "
                f"{med(algorithm, latency, 'stolen_wide'):.0f} | {wide_msgs:,.0f} | "
                f"{wide_bytes / 1e3:,.0f} KB | "
                f"{med(algorithm, latency, 'steal_attempts_wide'):.0f} |"
            )
    if has_matplotlib():
        plot_widearea(latencies, med)


def plot_widearea(latencies: tuple[float, ...], med: Any) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for algorithm in ("crs", "rs"):
        ax.plot(
            latencies,
            [med(algorithm, lat, "elapsed_s") for lat in latencies],
            marker="o",
            label=algorithm.upper(),
        )
    ax.set_xlabel("emulated wide-area latency, one way (ms)")
    ax.set_ylabel("runtime (s)")
    ax.set_ylim(bottom=0)
    ax.set_title("CRS vs RS, 2 clusters x 4 peers")
    ax.legend()
    fig.tight_layout()
    out = DOCS / "widearea.png"
    fig.savefig(out, dpi=110)
    print(f"\nplot: {out}")


# -- Table III -----------------------------------------------------------------------------------


def part_micro(args: argparse.Namespace) -> None:
    from micro import table_iii

    table_iii(args.repeat, args.quick)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    parser.add_argument("--part", choices=("all", "systems", "widearea", "micro"), default="all")
    parser.add_argument(
        "--systems",
        default="ray,dask,pool,sequential",
        help="comma-separated, from: " + ", ".join(SYSTEMS),
    )
    parser.add_argument(
        "--satind-config",
        action="append",
        metavar="FILE",
        help="also run satind with this TOML config, interleaved, as system satind[STEM] "
        "(repeatable): a before/after of one setting in one invocation",
    )
    parser.add_argument(
        "--background-load",
        type=int,
        default=0,
        metavar="N",
        help="N busy Python processes (each in a session of its own) run throughout: the "
        "fixed background load of docs/benchmarks.md (2 = one per core here)",
    )
    args = parser.parse_args()
    args.systems = [s for s in args.systems.split(",") if s]
    unknown = [s for s in args.systems if s not in SYSTEMS]
    if unknown:
        parser.error(f"unknown system(s) {', '.join(unknown)}; known: {', '.join(SYSTEMS)}")
    print("command: python benchmarks/compare.py " + shlex.join(sys.argv[1:]))
    print(f"machine: {machine()}\n")
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(args.background_load)
    ]
    if hogs:
        print(f"background load: {len(hogs)} busy process(es), pids {[h.pid for h in hogs]}\n")
    try:
        if args.part in ("all", "micro"):
            print("## Spawn and sync (Table III)\n")
            part_micro(args)
        if args.part in ("all", "systems"):
            print("\n## satind and the alternatives\n")
            part_systems(args)
        if args.part in ("all", "widearea"):
            print("\n## CRS vs RS under emulated wide-area latency\n")
            part_widearea(args)
    finally:
        for hog in hogs:  # the ones started here, by pid
            hog.kill()
            hog.wait()


if __name__ == "__main__":
    main()
