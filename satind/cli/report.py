"""What the command prints about a run: the run JSON (the same for `satind run`, `submit
--wait`, `result` and `resume --wait`) or its human summary, and a status reply as JSON."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from satind import stats
from satind.cli.exits import EXIT_FAILED, EXIT_OK
from satind.client.files import unsaved
from satind.client.runner import Failure, Outcome, outcome_of
from satind.config import Config
from satind.net import messages as m


def run_report(plugin: str, argv: Sequence[str], outcome: Outcome) -> dict[str, Any]:
    """The run JSON: the plugin's report and check were made on the run's master, so it is
    the same whichever machine the user asks from."""
    return {
        "run_id": outcome.run_id,
        "plugin": plugin,
        "args": list(argv),
        "result": outcome.report,
        "elapsed_s": round(outcome.elapsed_s, 6),
        "finish_s": round(outcome.finish_s, 6),
        "peers": outcome.peers,
        "efficiency": outcome.efficiency,
        "stats": outcome.stats,
        "check": outcome.check,
        **({"outputs": outcome.outputs} if outcome.outputs else {}),
    }


def print_report(report: dict[str, Any], as_json: bool) -> int:
    """Print a run's report; the exit code (1 when the plugin's check rejected the result)."""
    if as_json:
        print(json.dumps(report, default=_jsonable))
    else:
        counters = report["stats"]
        print(f"result: {report['result']}")
        where = f"{report['peers']} peers"
        computed = counters.get("peers_computed")
        if computed is not None and computed != report["peers"]:
            # Those present at the end are not those that computed: a peer that got no job,
            # a join, a drain. (A crashed peer's share never reaches the master: not counted.)
            where = f"{report['peers']} peers ({computed} computed for it)"
        if "clusters" in report:
            where += f" ({report['clusters']} cluster(s), {report['steal']})"
        print(
            f"run {report['run_id']}: {report['plugin']} {' '.join(report['args'])} on "
            f"{where} in {report['elapsed_s']:.3f} s (+{report.get('finish_s', 0.0):.3f} s "
            f"statistics and check); {_verdict(report['check'])}"
        )
        print("  " + _line(counters, stats.SUMMARY))
        if report.get("efficiency") is not None:
            cpus = report.get("cpus")
            shared = (
                f" ({report['peers']} peers shared {cpus} CPUs)"
                if cpus is not None and cpus < report["peers"]
                else ""
            )
            print(
                f"  efficiency {report['efficiency']:.3f}: compute sides busy "
                f"{counters['busy_s']:.3f} s of {report['peers']} peers x "
                f"{report['elapsed_s']:.3f} s{shared}"
            )
        for name, what in report.get("outputs", {}).items():
            print(f"  output {name}: {what}")
        if any(counters.get(name) for name in stats.RECOVERY):
            print("  recovery: " + _line(counters, stats.RECOVERY))
        if any(counters.get(name) for name in stats.SHARING):
            print("  shared objects: " + _line(counters, stats.SHARING))
        if any(counters.get(name) for name in stats.ITERATIVE):
            print("  iterative: " + _line(counters, stats.ITERATIVE))
        if any(counters.get(name) for name in stats.SPMD):
            print("  spmd: " + _line(counters, stats.SPMD))
        if any(counters.get(name) for name in stats.SPECULATION):
            print("  speculation: " + _line(counters, stats.SPECULATION))
        app = sorted(name for name in counters if name.startswith("app_"))
        if app:  # the plugin's own (satind.count)
            print("  application: " + " · ".join(f"{n[4:]} {_number(counters[n])}" for n in app))
    if report["check"].startswith("failed"):
        print(
            f"satind: the result failed the plugin's check: {report['check'][8:]}", file=sys.stderr
        )
        return EXIT_FAILED
    if as_json and report["check"].startswith(NOT_CHECKED):
        # Where a user of --json sees it (the summary line says it otherwise).
        print(f"satind: the result was not checked: {report['check'][13:]}", file=sys.stderr)
    return EXIT_OK


# The prefix of a verdict whose check could not verify the result (plugin/hooks.judge).
NOT_CHECKED = "not checked: "


def _verdict(check: str) -> str:
    """The summary line's end: "check ok", "check skipped (--no-check)", "check failed: ..."
    or "NOT CHECKED: why"."""
    if check.startswith(NOT_CHECKED):
        return f"NOT CHECKED: {check[len(NOT_CHECKED) :]}"
    if check == "skipped":
        return "check skipped (--no-check)"
    return f"check {check}"


def _line(counters: dict[str, Any], names: Sequence[str]) -> str:
    return " · ".join(f"{n.replace('_', ' ')} {_number(counters.get(n, 0))}" for n in names)


def _number(value: float) -> str:
    """A counter as printed: a count with thousands separators, seconds to 3 decimals."""
    return (
        f"{value:,.3f}"
        if isinstance(value, float) and not value.is_integer()
        else f"{int(value):,}"
    )


def show_result(
    result: m.RunResult,
    plugin_name: str,
    argv: list[str],
    as_json: bool,
    cfg: Config,
    saved: dict[str, str] | None = None,
) -> int:
    """Print a run's result as `satind run` does; the exit code. ``saved``: what became of
    the output files the result carries (None: none was written here)."""
    outcome = outcome_of(result, cfg)
    if isinstance(outcome, Failure):
        print(f"satind: {outcome.message}", file=sys.stderr)
        return EXIT_FAILED
    outcome.outputs = saved if saved is not None else unsaved(result)
    report = run_report(plugin_name, argv, outcome)
    return print_report(report, as_json)


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
