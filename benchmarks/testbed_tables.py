"""The tables of benchmarks/testbed_experiments.py: medians over its records (JSON lines),
the testbed's beside the simulator's and the papers' own numbers where they give them. Ratios
are of medians of the same records file: variants measured interleaved, in the same runs."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class Medians:
    """Medians over the records of one place (testbed or sim) and workload."""

    def __init__(self, records: list[dict[str, Any]], where: str, workload: str) -> None:
        self.rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.failed: dict[tuple[str, str], int] = {}
        for r in records:
            if r["where"] == where and r["workload"] == workload:
                key = (r["group"], r["variant"])
                if r.get("ok"):
                    self.rows.setdefault(key, []).append(r)
                else:
                    self.failed[key] = self.failed.get(key, 0) + 1

    def time(self, group: str, variant: str) -> float:
        return self.get(group, variant, lambda r: r["wall_s"])

    def stat(self, group: str, variant: str, key: str) -> float:
        return self.get(group, variant, lambda r: float(r["stats"].get(key, 0)))

    def get(self, group: str, variant: str, key: Callable[[dict[str, Any]], float]) -> float:
        rows = self.rows.get((group, variant))
        return statistics.median(key(r) for r in rows) if rows else math.nan

    def n(self, group: str, variant: str) -> str:
        ok, bad = len(self.rows.get((group, variant), [])), self.failed.get((group, variant), 0)
        return f"{ok}" + (f" (+{bad} failed)" if bad else "")


def pct(x: float, base: float) -> str:
    return "-" if math.isnan(x) or math.isnan(base) else f"{100 * (x - base) / base:+.1f}%"


def num(x: float, fmt: str = ".1f") -> str:
    return "-" if math.isnan(x) else format(x, fmt)


@dataclass(frozen=True)
class Section:
    """One table: an experiment's variants (by their label's first word, "(b)"), the time
    column against the first (normalized when ``ratio``), and the lines that compare two
    variants: ("faster", x, y, the paper's) says by how much less time x took than y (as
    recovery_procs.py's "(b) vs (a)"), ("against", x, y, ...) how much more."""

    group: str
    title: str
    keys: tuple[str, ...]
    lines: tuple[tuple[str, str, str, str], ...]
    ratio: bool = False


SECTIONS = (
    Section("two", "satin-fault-tolerance Fig 4 (a): cluster c1 of 2 goes at half time",
            ("(0)", "(a)", "(b)", "(c)", "(d)"),
            (("faster", "(b)", "(a)", "25% on average over 4 runs"),
             ("faster", "(c)", "(b)", "another 15%"),
             ("against", "(c)", "(d)", "under 8%"))),
    Section("two", "satin-grid Fig 6: a cluster crashes (or leaves) at half time",
            ("(0)", "(a)", "(b)", "(e)", "(f)", "(c)", "(a')", "(b')", "(e')", "(f')", "(c')"),
            (("faster", "(b)", "(a)", "9% on average, both clusters, three applications"),
             ("faster", "(e)", "(b)", "another 26% on average (intervals of 1, 2, 5 min)"),
             ("faster", "(f)", "(b)", "(Satin has one checkpoint policy)"),
             ("faster", "(b')", "(a')", "as above"),
             ("faster", "(e')", "(b')", "as above"),
             ("faster", "(f')", "(b')", "-"),
             ("faster", "(c)", "(a)", "up to 69%"),
             ("faster", "(c')", "(a')", "up to 69%")),
            ratio=True),
    Section("four", "satin-fault-tolerance Fig 4 (b): cluster c1 of 4 goes at half time",
            ("(0)", "(a)", "(b)", "(c)", "(d)"),
            (("faster", "(b)", "(a)", "as in (a), smaller differences (no numbers)"),
             ("against", "(c)", "(d)", "as in (a)"))),
    Section("migrate", "satin-fault-tolerance Fig 5: migration, c2 replaced at half time",
            ("(0)", "(m)"), (("against", "(m)", "(0)", "under 2%"),)),
)  # fmt: skip


def section(tb: Medians, sim: Medians, sec: Section, labels: list[str]) -> None:
    """The table (variant | testbed s | against the first | restarted | reused | from logs |
    simulator s | against its first) and the comparison lines."""
    by_key = {label.split(" ")[0]: label for label in labels}
    rows = [by_key[k] for k in sec.keys]
    g, base = sec.group, rows[0]
    print(f"\n### {sec.title}\n")
    print(
        f"| variant | testbed: s (n) | {'normalized' if sec.ratio else 'against (0)'} | jobs "
        "restarted | results reused | from logs | simulator: virtual s | normalized |"
    )
    print("|---|---|---|---|---|---|---|---|")
    rel = ratio if sec.ratio else pct
    for v in rows:
        t, s = tb.time(g, v), sim.time(g, v)
        print(
            f"| {v} | {num(t, '.2f')} ({tb.n(g, v)}) | {rel(t, tb.time(g, base))} | "
            f"{num(tb.stat(g, v, 'jobs_restarted'), 'g')} | "
            f"{num(tb.stat(g, v, 'results_reused'), 'g')} | "
            f"{num(tb.stat(g, v, 'results_from_logs'), 'g')} | {num(s, '.2f')} | "
            f"{ratio(s, sim.time(g, base))} |"
        )
    print()
    for how, x, y, paper in sec.lines:
        vx, vy = by_key[x], by_key[y]
        word, f = ("faster than", faster) if how == "faster" else ("against", pct)
        print(
            f"- {x} {word} {y}: testbed {f(tb.time(g, vx), tb.time(g, vy))}, simulator "
            f"{f(sim.time(g, vx), sim.time(g, vy))}; the paper: {paper}"
        )


def ratio(x: float, base: float) -> str:
    return "-" if math.isnan(x) or math.isnan(base) else f"{x / base:.2f}"


def faster(x: float, than: float) -> str:
    """How much less time x took than ``than``."""
    return "-" if math.isnan(x) or math.isnan(than) else f"{100 * (than - x) / than:.1f}%"


def report(records: list[dict[str, Any]], workload: str, names: dict[str, list[str]]) -> None:
    """The tables of the experiments ``names`` (experiment -> its variants' labels) for one
    workload: the testbed's medians beside the simulator's, and the paper's own numbers
    where it gives them."""
    tb, sim = Medians(records, "testbed", workload), Medians(records, "sim", workload)
    print(f"\n## {workload}")
    for sec in SECTIONS:
        if sec.group in names:
            section(tb, sim, sec, names[sec.group])
    if "table6" in names:
        table6(tb, sim, names["table6"])


def table6(tb: Medians, sim: Medians, variants: list[str]) -> None:
    print("\n### satin-grid Table VI: CRS against RS, 5 clusters, 10 ms one way\n")
    print(
        "| variant | testbed: s (n) | in clusters: jobs stolen | messages | KB | "
        "across: jobs stolen | messages | KB | wide steal attempts | "
        "simulator: virtual s | stolen in / across |"
    )
    print("|---" * 11 + "|")
    for v in variants:

        def st(key: str, m: Medians = tb, v: str = v) -> float:
            return m.stat("table6", v, key)

        wide_msgs, wide_kb = st("messages_wide"), st("bytes_wide") / 1e3
        print(
            f"| {v} | {num(tb.time('table6', v), '.2f')} ({tb.n('table6', v)}) | "
            f"{num(st('stolen_local'), 'g')} | {num(st('messages') - wide_msgs, ',.0f')} | "
            f"{num(st('bytes') / 1e3 - wide_kb, ',.0f')} | {num(st('stolen_wide'), 'g')} | "
            f"{num(wide_msgs, ',.0f')} | {num(wide_kb, ',.0f')} | "
            f"{num(st('steal_attempts_wide'), 'g')} | {num(sim.time('table6', v), '.2f')} | "
            f"{num(st('stolen_local', sim), 'g')} / {num(st('stolen_wide', sim), 'g')} |"
        )
    print(
        "\nThe paper (CRS, 5 DAS-3 clusters, 576 cores; jobs stolen in clusters / across): "
        "Barnes-Hut 25,270 / 11,858, gene sequencing 8,489 / 5,515, grammar 30,020 / 17,236; "
        'messages 56-170x fewer across; RS: "the reverse is true" (no numbers).'
    )
