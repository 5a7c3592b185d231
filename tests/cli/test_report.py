"""The run summary `satind run`, `submit --wait` and `result` print (cli/report.py)."""

from __future__ import annotations

from typing import Any

import pytest

from satind.cli.report import print_report


def _report(**over: Any) -> dict[str, Any]:
    report: dict[str, Any] = {
        "run_id": "r-1",
        "plugin": "fib",
        "args": ["30"],
        "result": 832040,
        "elapsed_s": 2.0,
        "finish_s": 0.01,
        "peers": 4,
        "efficiency": 0.9,
        "stats": {"busy_s": 7.2, "peers_computed": 4},
        "check": "ok",
    }
    report.update(over)
    return report


def test_the_summary_names_the_peers_that_computed_and_the_cpus_they_shared(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_report(_report(), as_json=False)
    plain = capsys.readouterr().out
    assert "fib 30 on 4 peers in 2.000 s" in plain and "shared" not in plain
    # A run whose peers changed (a crash, a join): those that computed, and those at the end.
    print_report(_report(peers=2, stats={"busy_s": 3.0, "peers_computed": 3}), as_json=False)
    assert "on 2 peers (3 computed for it) in" in capsys.readouterr().out
    # Local peers on fewer CPUs than peers: their efficiency says so.
    print_report(_report(cpus=2), as_json=False)
    assert "of 4 peers x 2.000 s (4 peers shared 2 CPUs)" in capsys.readouterr().out
