"""The study of scheduling-iterative-apps-volatile-resources §7 as a discrete-time simulator:
an iterative master-worker application (``iterations`` iterations of ``m`` same-size tasks,
a barrier after each) on ``p`` workers whose availability follows their Markov chains, a master
that sends at most ``n_com`` transfers (program or task data) at once, and a heuristic that
decides which UP worker gets which task.

The pieces: ``volatile/platform.py`` (parameters, platforms, availability traces),
``volatile/slots.py`` (one heuristic's run, slot by slot, and the choices where the paper is
silent); this module makes the instances, runs every heuristic on each, and aggregates them
into the paper's Table 2 (``python -m satind.volatile.study``).
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
import zlib
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace

from satind.volatile.heuristics import NAMES, canonical
from satind.volatile.platform import Params, Platform, Traces
from satind.volatile.slots import simulate

# Table 1 of the paper.
TASKS = (5, 10, 20, 40)
N_COM = (5, 10, 20)
W_MIN = tuple(range(1, 11))

# Table 2 of the paper: heuristic -> (average dfb, wins over 296,400 instances).
PAPER_TABLE2: dict[str, tuple[float, int]] = {
    "emct": (4.77, 80320),
    "emct*": (4.81, 78947),
    "mct": (5.35, 73946),
    "mct*": (5.46, 70952),
    "ud*": (7.06, 42578),
    "ud": (8.09, 31120),
    "lw*": (11.15, 28802),
    "lw": (12.74, 19529),
    "random1w": (28.42, 259),
    "random2w": (28.43, 301),
    "random4w": (28.51, 278),
    "random3w": (31.49, 188),
    "random3": (44.01, 87),
    "random4": (47.33, 88),
    "random1": (47.44, 36),
    "random2": (47.53, 73),
    "random": (47.87, 45),
}


# -- the study: instances, degradation from best, Table 2 ------------------------------------


@dataclass(frozen=True)
class Instance:
    """A scenario's parameters, the seed of its platform and the seed of its trial."""

    params: Params
    platform_seed: int
    trial_seed: int


def instances(
    platforms: int,
    trials: int,
    seed: int = 1,
    tasks: Sequence[int] = TASKS,
    n_com: Sequence[int] = N_COM,
    w_min: Sequence[int] = W_MIN,
    base: Params = Params(),
) -> Iterator[Instance]:
    """§7's design: for every (m, n_com, w_min), ``platforms`` random platforms, each run with
    ``trials`` seeds of the availability traces (the paper: 247 and 10)."""
    for m in tasks:
        for nc in n_com:
            for wm in w_min:
                params = replace(base, m=m, n_com=nc, w_min=wm)
                for k in range(platforms):
                    platform_seed = zlib.crc32(f"{seed}:{m}:{nc}:{wm}:{k}".encode())
                    for trial in range(trials):
                        yield Instance(params, platform_seed, platform_seed * 1000 + trial)


def run_instance(
    instance: Instance, heuristics: Sequence[str] = NAMES
) -> tuple[Instance, dict[str, int]]:
    """Every heuristic on one instance (the same platform and the same traces): makespans."""
    platform = Platform.draw(instance.params, random.Random(instance.platform_seed))
    traces = Traces(platform, instance.trial_seed, instance.params.initial)
    return instance, {
        h: simulate(instance.params, platform, traces, h, instance.trial_seed).makespan
        for h in heuristics
    }


@dataclass
class Table:
    """Table 2: per heuristic, the average degradation from best (percent) and the wins."""

    dfb: dict[str, float] = field(default_factory=dict)
    wins: dict[str, int] = field(default_factory=dict)
    instances: int = 0
    # Per w_min: per heuristic, the average dfb (the paper's Figure 2).
    by_w_min: dict[int, dict[str, float]] = field(default_factory=dict)
    # Half-width of the 95% confidence interval of each average dfb (over the scenarios'
    # means, normal approximation).
    ci95: dict[str, float] = field(default_factory=dict)
    # What each starred heuristic gains over its plain one (dfb points, plain minus starred,
    # paired per scenario): the mean and its 95% half-width.
    star_gain: dict[str, tuple[float, float]] = field(default_factory=dict)


def _ci95(values: Sequence[float]) -> float:
    return 1.96 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan


def summarize(results: Sequence[tuple[Instance, dict[str, int]]]) -> Table:
    """Degradation from best per instance, averaged per scenario (over its trials) and then
    over scenarios, as §7 does; a win is a makespan equal to the instance's best."""
    per_scenario: dict[tuple[Params, int], dict[str, list[float]]] = {}
    table = Table(instances=len(results))
    for inst, makespans in results:
        best = min(makespans.values())
        cell = per_scenario.setdefault((inst.params, inst.platform_seed), {})
        for h, mk in makespans.items():
            cell.setdefault(h, []).append(100.0 * (mk - best) / best)
            table.wins[h] = table.wins.get(h, 0) + (mk == best)
    sums: dict[str, list[float]] = {}
    by_w: dict[int, dict[str, list[float]]] = {}
    for (params, _), cell in per_scenario.items():
        for h, values in cell.items():
            mean = statistics.fmean(values)
            sums.setdefault(h, []).append(mean)
            by_w.setdefault(params.w_min, {}).setdefault(h, []).append(mean)
    table.dfb = {h: statistics.fmean(v) for h, v in sums.items()}
    table.ci95 = {h: _ci95(v) for h, v in sums.items()}
    for h in sums:
        if h.endswith("*") and h[:-1] in sums:
            gains = [a - b for a, b in zip(sums[h[:-1]], sums[h], strict=True)]
            table.star_gain[h[:-1]] = (statistics.fmean(gains), _ci95(gains))
    table.by_w_min = {
        w: {h: statistics.fmean(v) for h, v in cells.items()} for w, cells in sorted(by_w.items())
    }
    return table


def run_study(
    platforms: int,
    trials: int,
    jobs: int = 1,
    seed: int = 1,
    tasks: Sequence[int] = TASKS,
    n_com: Sequence[int] = N_COM,
    w_min: Sequence[int] = W_MIN,
    base: Params = Params(),
    heuristics: Sequence[str] = NAMES,
) -> Table:
    """The whole study, on ``jobs`` processes."""
    todo = list(instances(platforms, trials, seed, tasks, n_com, w_min, base))
    if jobs <= 1:
        results = [run_instance(i, heuristics) for i in todo]
    else:
        with ProcessPoolExecutor(jobs) as pool:
            results = list(pool.map(run_instance, todo, [heuristics] * len(todo), chunksize=4))
    return summarize(results)


def format_table(table: Table, paper: bool = True) -> str:
    """Table 2 as markdown, sorted by average dfb, next to the paper's."""
    head = "| heuristic | average dfb | ± 95% | wins |"
    rule = "|---|---|---|---|"
    if paper:
        head += " paper's dfb | paper's wins |"
        rule += "---|---|"
    lines = [head, rule]
    for h in sorted(table.dfb, key=lambda name: table.dfb[name]):
        ci = table.ci95.get(h, math.nan)
        line = f"| {h.upper()} | {table.dfb[h]:.2f} | {ci:.2f} | {table.wins.get(h, 0)} |"
        if paper:
            pd, pw = PAPER_TABLE2[h]
            line += f" {pd:.2f} | {pw} |"
        lines.append(line)
    if table.star_gain:
        lines += ["", "| heuristic | starred's gain (dfb points) | ± 95% |", "|---|---|---|"]
        for h, (gain, ci) in sorted(table.star_gain.items()):
            lines.append(f"| {h.upper()} → {h.upper()}* | {gain:+.2f} | {ci:.2f} |")
    return "\n".join(lines)


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give integers separated by commas") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m satind.volatile.study",
        description=(
            "Reproduce Table 2 of Casanova et al., 'Scheduling parallel iterative applications "
            "on volatile resources' (§7): every heuristic on the same random platforms and "
            "availability traces; average degradation from best and wins. The paper used "
            "247 platforms and 10 trials per scenario (296,400 instances)."
        ),
    )
    parser.add_argument("--platforms", type=int, default=2, help="platforms per scenario")
    parser.add_argument("--trials", type=int, default=2, help="trace seeds per platform")
    parser.add_argument("--jobs", type=int, default=1, help="processes to run instances on")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tasks", type=_ints, default=list(TASKS), help="m values, e.g. 5,10")
    parser.add_argument("--ncom", type=_ints, default=list(N_COM), help="n_com values")
    parser.add_argument("--wmin", type=_ints, default=list(W_MIN), help="w_min values")
    parser.add_argument(
        "--chains",
        choices=("true", "estimated"),
        default="true",
        help="what heuristics know of the workers' chains",
    )
    parser.add_argument(
        "--initial", choices=("up", "stationary"), default="up", help="workers' states at slot 0"
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=2,
        help="extra copies of a task at most, for idle UP workers (§6.1: 2; 1 gives the "
        "paper's scale of degradations: docs/benchmarks.md)",
    )
    parser.add_argument(
        "--n-active",
        choices=("paper", "self"),
        default="paper",
        help="the starred heuristics' n_active: paper = the paper's letter, the workers given "
        "a task so far (the first task's transfer counts for nothing); self = a worker not "
        "given one yet counts itself too (docs/volatile.md)",
    )
    parser.add_argument("--heuristics", default="", help="comma-separated subset (default all)")
    args = parser.parse_args(argv)
    if args.platforms < 1 or args.trials < 1 or args.jobs < 1:
        parser.error("--platforms, --trials and --jobs must be at least 1")
    if args.replicas < 0:
        parser.error("--replicas must be 0 or more")
    try:
        names = [canonical(h) for h in args.heuristics.split(",") if h] or list(NAMES)
    except ValueError as exc:
        parser.error(str(exc))
    base = Params(
        chains=args.chains, initial=args.initial, replicas=args.replicas, n_active=args.n_active
    )
    count = len(args.tasks) * len(args.ncom) * len(args.wmin) * args.platforms * args.trials
    started = time.perf_counter()
    table = run_study(
        args.platforms,
        args.trials,
        args.jobs,
        args.seed,
        args.tasks,
        args.ncom,
        args.wmin,
        base,
        names,
    )
    took = time.perf_counter() - started
    print(f"{count} instances, {len(names)} heuristics, {took:.1f} s on {args.jobs} process(es)\n")
    print(format_table(table, paper=set(names) == set(NAMES)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
