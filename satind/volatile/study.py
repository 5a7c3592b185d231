"""The study of scheduling-iterative-apps-volatile-resources §7 as a discrete-time simulator:
an iterative master-worker application (``iterations`` iterations of ``m`` same-size tasks,
a barrier after each) on ``p`` workers whose availability follows their Markov chains, a master
that sends at most ``n_com`` transfers (program or task data) at once, and a heuristic that
decides which UP worker gets which task.

One slot of the simulation, for every worker:

1. its state for the slot comes from its trace (traces are drawn once per instance, so every
   heuristic meets the same availability);
2. going DOWN loses its program, its task data and its partial result (its tasks go back to
   the pool); RECLAIMED suspends everything (kept for the release);
3. if some worker could start something and a channel is free, the heuristic plans the tasks
   not yet begun; a worker planned for a task starts receiving the program if it has none,
   else the task's data if it holds no task beyond the one it computes (§3.3: data for at
   most one task ahead); when UP workers outnumber the tasks left, idle workers get replicas
   (up to ``replicas`` extra copies of a task, §6.1), the first copy to finish cancels the
   others;
4. UP workers progress: up to ``n_com`` transfers (in the order they started), and each
   worker's computation — overlapped with the data of its next task.

Choices where the paper is silent, each a field of ``Params`` (docs/volatile.md): workers
start UP (``initial``); a worker receives the program before any data, over one link; a
reclaimed worker's transfer gives up its channel and queues for one when released; replicas
use bandwidth like any task; Delay(q) is the time to finish the begun work (its program, the
computation of its current task, and its next task's data overlapped with that computation,
then the next task's computation); heuristics know the true chains (``chains="estimated"``
makes them learn the chains from the states seen, as the daemons do).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import zlib
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace

from satind.volatile.heuristics import NAMES, Candidate, assignments, canonical
from satind.volatile.model import DOWN, RECLAIMED, UP, Chain, Estimator

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


@dataclass(frozen=True)
class Params:
    """One scenario of the study (§7) and the simulator's choices."""

    p: int = 20
    m: int = 10
    n_com: int = 10
    w_min: int = 1
    iterations: int = 10
    replicas: int = 2  # extra copies of a task at most
    initial: str = "up"  # "up" or "stationary": the workers' states at slot 0
    chains: str = "true"  # "true" or "estimated": what the heuristics know
    max_slots: int = 2_000_000  # a run that has not finished by then counts as failed

    @property
    def t_data(self) -> int:
        return self.w_min

    @property
    def t_prog(self) -> int:
        return 5 * self.w_min


@dataclass(frozen=True)
class Platform:
    """The workers of one experimental scenario: their chains and speeds."""

    chains: tuple[Chain, ...]
    w: tuple[int, ...]

    @staticmethod
    def draw(params: Params, rng: random.Random) -> Platform:
        """§7: P_xx ~ U[0.90, 0.99] for each state x, P_xy = (1 - P_xx) / 2, and w_q ~
        U[w_min, 10 w_min] (integer slots)."""
        chains = tuple(
            Chain.symmetric(
                (rng.uniform(0.9, 0.99), rng.uniform(0.9, 0.99), rng.uniform(0.9, 0.99))
            )
            for _ in range(params.p)
        )
        w = tuple(rng.randint(params.w_min, 10 * params.w_min) for _ in range(params.p))
        return Platform(chains, w)


class Traces:
    """Each worker's state at every slot, drawn lazily from its chain and kept, so that every
    heuristic run on an instance meets the same availability."""

    def __init__(self, platform: Platform, seed: int, initial: str) -> None:
        self.chains = platform.chains
        self.rngs = [random.Random(f"{seed}:{q}") for q in range(len(self.chains))]
        first = []
        for q, chain in enumerate(self.chains):
            if initial == "stationary":
                pi = chain.stationary()
                x = self.rngs[q].random()
                first.append(UP if x < pi[0] else RECLAIMED if x < pi[0] + pi[1] else DOWN)
            else:
                first.append(UP)
        self.states: list[list[int]] = [[s] for s in first]
        self.slots: list[tuple[int, ...]] = []

    def at(self, t: int) -> tuple[int, ...]:
        """Every worker's state at slot ``t``."""
        slots = self.slots
        while len(slots) <= t:
            n = len(slots)
            for q, states in enumerate(self.states):
                while len(states) <= n:
                    states.append(self.chains[q].step(states[-1], self.rngs[q]))
            slots.append(tuple(states[n] for states in self.states))
        return slots[t]


@dataclass
class _Worker:
    w: int
    has_prog: bool = False
    prog_left: int = -1  # slots of program transfer left; -1: not receiving it
    cur: int = -1  # task computing (-1: none)
    comp_left: int = 0
    nxt: int = -1  # task whose data is coming or came (-1: none)
    data_left: int = 0
    asked_at: int = -1  # slot its current transfer started (channel order); -1: none

    def ready(self) -> bool:
        """Could start a transfer now: the program, or the data of a next task."""
        return self.asked_at < 0 and (not self.has_prog or self.nxt < 0)

    def delay(self, t_prog: int) -> int:
        """Delay(q): slots to finish the begun work if it stays UP without contention."""
        d = 0 if self.has_prog else (self.prog_left if self.prog_left >= 0 else t_prog)
        c = self.comp_left if self.cur >= 0 else 0
        if self.nxt >= 0:
            return d + max(c, self.data_left) + self.w
        return d + c

    def cancel(self, task: int) -> None:
        """Another copy of ``task`` finished: this one's data and partial result go."""
        if self.cur == task:
            self.cur, self.comp_left = -1, 0
        if self.nxt == task:
            self.nxt, self.data_left = -1, 0
            if self.prog_left < 0:
                self.asked_at = -1


@dataclass
class Outcome:
    """One heuristic's run on one instance."""

    makespan: int  # slots; params.max_slots when it did not finish
    transfers: int = 0  # program and data transfers started
    replicas: int = 0  # replica copies started


class _Run:
    """One heuristic on one instance (see the module's docstring for a slot's steps)."""

    def __init__(
        self, params: Params, platform: Platform, traces: Traces, heuristic: str, seed: int
    ) -> None:
        self.params = params
        self.platform = platform
        self.traces = traces
        self.heuristic = heuristic
        self.rng = random.Random(f"{seed}:{heuristic}")
        self.ws = [_Worker(w) for w in platform.w]
        self.estimators = [Estimator() for _ in self.ws] if params.chains == "estimated" else None
        self.out = Outcome(0)
        self.t = 0

    def run(self) -> Outcome:
        params = self.params
        for _ in range(params.iterations):
            if not self._iteration():
                self.out.makespan = params.max_slots
                return self.out
        self.out.makespan = self.t
        return self.out

    def _iteration(self) -> bool:
        params, ws = self.params, self.ws
        m, n_com = params.m, params.n_com
        self.done = done = [False] * m
        self.copies: list[list[int]] = [[] for _ in range(m)]
        copies = self.copies
        self.left = m
        while self.left > 0:
            if self.t >= params.max_slots:
                return False
            states = self.traces.at(self.t)
            if self.estimators is not None:
                for q, s in enumerate(states):
                    self.estimators[q].observe(s)
            for q, s in enumerate(states):  # losses
                if s == DOWN:
                    wk = ws[q]
                    if wk.has_prog or wk.prog_left >= 0 or wk.cur >= 0 or wk.nxt >= 0:
                        for task in (wk.cur, wk.nxt):
                            if task >= 0:
                                copies[task].remove(q)
                        ws[q] = _Worker(wk.w)
            up = [q for q, s in enumerate(states) if s == UP]
            busy = sum(1 for q in up if ws[q].asked_at >= 0)
            if busy < n_com and any(ws[q].ready() for q in up):
                self._schedule(up, n_com - busy)
            # Progress: transfers in the order they started, n_com at most; computations.
            movers = sorted((ws[q].asked_at, q) for q in up if ws[q].asked_at >= 0)
            for _, q in movers[:n_com]:
                wk = ws[q]
                if wk.prog_left > 0:
                    wk.prog_left -= 1
                    if wk.prog_left == 0:
                        wk.has_prog, wk.prog_left, wk.asked_at = True, -1, -1
                elif wk.nxt >= 0 and wk.data_left > 0:
                    wk.data_left -= 1
                    if wk.data_left == 0:
                        wk.asked_at = -1
            for q in up:
                wk = ws[q]
                if wk.cur >= 0:
                    wk.comp_left -= 1
                    if wk.comp_left == 0:
                        task, wk.cur = wk.cur, -1
                        if not done[task]:
                            done[task] = True
                            self.left -= 1
                            for other in copies[task]:
                                if other != q:
                                    ws[other].cancel(task)
                            copies[task] = []
                if wk.cur < 0 and wk.nxt >= 0 and wk.data_left == 0 and wk.asked_at < 0:
                    wk.cur, wk.comp_left, wk.nxt = wk.nxt, wk.w, -1
            self.t += 1
        return True

    def _candidates(self, qs: Sequence[int]) -> list[Candidate]:
        t_prog = self.params.t_prog
        return [
            Candidate(
                q,
                self.ws[q].w,
                self.ws[q].delay(t_prog),
                self.estimators[q].chain()
                if self.estimators is not None
                else self.platform.chains[q],
            )
            for q in qs
        ]

    def _start(self, q: int, task: int) -> bool:
        """Start ``q``'s next transfer: the program if it has none (the task stays unbegun),
        else ``task``'s data. True when the task is begun."""
        wk = self.ws[q]
        self.out.transfers += 1
        wk.asked_at = self.t
        if not wk.has_prog:
            if wk.prog_left <= 0:
                wk.prog_left = self.params.t_prog
            return False
        wk.nxt, wk.data_left = task, self.params.t_data
        self.copies[task].append(q)
        return True

    def _schedule(self, up: list[int], free: int) -> None:
        """Plan the tasks not begun, start what can start now, then replicas."""
        params, ws, done, copies = self.params, self.ws, self.done, self.copies
        unbegun = [i for i in range(params.m) if not done[i] and not copies[i]]
        if unbegun:
            order = assignments(
                self.heuristic,
                self._candidates(up),
                len(unbegun),
                params.t_data,
                params.n_com,
                self.rng,
            )
            ready = sum(1 for q in up if ws[q].ready())
            seen: set[int] = set()
            at = 0
            for q in order:
                if free <= 0 or at >= len(unbegun) or ready <= 0:
                    break  # nothing more can start now: the rest of the plan waits
                if q in seen or not ws[q].ready():
                    continue
                seen.add(q)
                free -= 1
                ready -= 1
                if self._start(q, unbegun[at]):
                    at += 1
        if params.replicas <= 0 or free <= 0 or len(up) <= self.left:
            return
        idle = [q for q in up if ws[q].cur < 0 and ws[q].nxt < 0 and ws[q].ready()]
        open_tasks = [
            i for i in range(params.m) if not done[i] and 0 < len(copies[i]) <= params.replicas
        ]
        if not idle or not open_tasks:
            return
        order = assignments(
            self.heuristic,
            self._candidates(idle),
            len(idle),
            params.t_data,
            params.n_com,
            self.rng,
        )
        seen = set()
        for q in order:
            if free <= 0:
                break
            if q in seen:
                continue
            seen.add(q)
            open_tasks.sort(key=lambda i: len(copies[i]))
            if len(copies[open_tasks[0]]) > params.replicas:
                break
            free -= 1
            if self._start(q, open_tasks[0]):
                self.out.replicas += 1


def simulate(
    params: Params, platform: Platform, traces: Traces, heuristic: str, seed: int = 0
) -> Outcome:
    """One run of ``heuristic``: the slots ``params.iterations`` iterations took."""
    return _Run(params, platform, traces, heuristic, seed).run()


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
    head = "| heuristic | average dfb | wins |"
    rule = "|---|---|---|"
    if paper:
        head += " paper's dfb | paper's wins |"
        rule += "---|---|"
    lines = [head, rule]
    for h in sorted(table.dfb, key=lambda name: table.dfb[name]):
        line = f"| {h.upper()} | {table.dfb[h]:.2f} | {table.wins.get(h, 0)} |"
        if paper:
            pd, pw = PAPER_TABLE2[h]
            line += f" {pd:.2f} | {pw} |"
        lines.append(line)
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
    parser.add_argument("--heuristics", default="", help="comma-separated subset (default all)")
    args = parser.parse_args(argv)
    if args.platforms < 1 or args.trials < 1 or args.jobs < 1:
        parser.error("--platforms, --trials and --jobs must be at least 1")
    try:
        names = [canonical(h) for h in args.heuristics.split(",") if h] or list(NAMES)
    except ValueError as exc:
        parser.error(str(exc))
    base = Params(chains=args.chains, initial=args.initial)
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
