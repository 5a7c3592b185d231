"""Run traces on real processes: `satind run --trace` and `submit --wait --trace` write a
Chrome trace-event JSON with one process track per peer, jobs and steals in it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from satind.net.names import slot_of
from tests.integration.test_daemon import Daemon, client, satind

pytestmark = pytest.mark.slow


def tracks(trace: dict[str, Any]) -> dict[int, str]:
    return {
        e["pid"]: slot_of(e["args"]["name"].split(" ")[0])
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "process_name"
    }


def check(trace: dict[str, Any], peers: set[str]) -> None:
    events = trace["traceEvents"]
    assert set(tracks(trace).values()) == peers
    assert len(tracks(trace)) == len(peers)  # one track per peer
    named = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "thread_name"}
    assert len(named) == 4 * len(peers)
    jobs = [e for e in events if e.get("cat") == "job"]
    steals = [e for e in events if e.get("cat") == "steal" and e["name"].startswith("stole")]
    assert jobs and steals
    for event in jobs + steals:
        assert event["ph"] == "X" and event["dur"] >= 0 and event["ts"] >= 0
        assert event["pid"] in tracks(trace)
    # The root ran on one peer and holds the most jobs; stolen jobs ran on both sides.
    assert {e["pid"] for e in jobs} == set(tracks(trace))


def test_satind_run_writes_a_trace_with_a_track_per_peer(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    done = satind("run", "tree", "4", "3", "20", "sleep", "--peers", "2", "--trace", str(out))
    assert done.returncode == 0, done.stderr
    assert f"written to {out}" in done.stderr
    check(json.loads(out.read_text()), {"local/0", "local/1"})


def test_submit_wait_writes_the_trace_and_needs_wait(keys: Path, tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    daemon = Daemon(keys, "m1", "east")
    try:
        refused = client(keys, daemon.first, "submit", "fib", "20", "--trace", str(out))
        assert refused.returncode == 2 and "--trace needs --wait" in refused.stderr
        done = client(
            keys, daemon.first, "submit", "tree", "4", "3", "20", "sleep", "--wait",
            "--trace", str(out),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        check(json.loads(out.read_text()), {"m1/0", "m1/1"})
    finally:
        daemon.kill()
