"""Run traces: the bounded per-run rings, failed-steal streaks, recovery instants, and the
Chrome trace-event JSON they become (one process track per peer, a thread per kind)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from satind import trace
from satind.config import TraceConfig
from satind.net import codec
from satind.net import messages as m
from satind.net.records import TraceEvent


def test_a_run_keeps_its_newest_events_and_counts_the_dropped() -> None:
    traces = trace.Traces(TraceConfig(max_events=3, keep_runs=2))
    for i in range(5):
        traces.job("r1", "fib", 100.0 + i, 100.5 + i, 1)
    ring = traces.get("r1")
    assert ring is not None
    assert [e.at for e in ring.events] == [102.0, 103.0, 104.0]
    assert ring.dropped == 2
    traces.of("r2")
    traces.of("r3")
    assert traces.get("r1") is None  # keep_runs: the oldest run's trace goes


def test_short_waits_are_not_recorded() -> None:
    traces = trace.Traces(TraceConfig(min_wait_s=0.001))
    traces.wait("r", 10.0, 10.0005)
    traces.wait("r", 11.0, 11.25)
    ring = traces.get("r")
    assert ring is not None
    assert [(e.name, e.at, e.dur) for e in ring.events] == [("sync waits", 11.0, 0.25)]


def test_failed_steals_merge_into_one_span_closed_by_a_success(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answered = iter([1.001, 1.002, 1.003, 1.2])  # when each reply (or timeout) came
    monkeypatch.setattr(time, "time", lambda: next(answered))
    traces = trace.Traces(TraceConfig(streak_gap_s=0.05))
    traces.steal(["r"], "v", False, 1.0, None)
    traces.steal(["r"], "v", False, 1.0015, None)
    traces.steal(["r"], "w", False, 1.0025, None)
    traces.steal(["r"], "w", False, 1.19, "r")
    ring = traces.get("r")
    assert ring is not None
    events = list(ring.events)
    assert [e.name for e in events] == ["3 failed steals", "stole from w"]
    assert events[0].at == 1.0 and events[0].dur == pytest.approx(0.003)
    assert events[1].track == trace.STEALS_LOCAL and events[1].detail == "local"
    assert events[1].at == 1.19 and events[1].dur == pytest.approx(0.01)


def test_a_failure_long_after_the_last_starts_a_new_streak(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(time, "time", lambda: 5.0)
    traces = trace.Traces(TraceConfig(streak_gap_s=0.05))
    traces.steal(["r"], "v", True, 1.0, None)
    traces.steal(["r"], "v", True, 9.0, None)  # 4 s after the last ended
    traces.flush()
    ring = traces.get("r")
    assert ring is not None
    assert [(e.name, e.track) for e in ring.events] == [
        ("1 failed steal", trace.STEALS_WIDE),
        ("1 failed steal", trace.STEALS_WIDE),
    ]


def test_recovery_instants_go_to_every_run_given() -> None:
    traces = trace.Traces(TraceConfig())
    traces.instant(["a", "b"], "jobs restarted", "4 put back")
    for run_id in ("a", "b"):
        ring = traces.get(run_id)
        assert ring is not None
        (event,) = ring.events
        assert event.dur == trace.INSTANT and event.track == trace.EVENTS


def test_chrome_trace_has_one_process_track_per_peer_and_relative_microseconds(
    tmp_path: Path,
) -> None:
    peers = [
        (
            "p/1",
            [TraceEvent(trace.STEALS_WIDE, "steal", "stole from p/0", 1001.0, 0.002, "wide")],
            0,
        ),
        (
            "p/0",
            [
                TraceEvent(trace.COMPUTE, "job", "fib", 1000.0, 1.5, "10 jobs"),
                TraceEvent(trace.EVENTS, "recovery", "new master", 1000.5, trace.INSTANT, "x"),
            ],
            7,
        ),
    ]
    path = tmp_path / "t.json"
    note = trace.save(path, peers, "run-1")
    assert "3 events from 2 peers" in note
    data = json.loads(path.read_text())
    events = data["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {1: "p/0 (7 older events dropped)", 2: "p/1"}  # sorted by peer name
    threads = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "thread_name"}
    assert threads == {(pid, t) for pid in (1, 2) for t in trace.TRACKS}
    job = next(e for e in events if e.get("cat") == "job")
    assert (job["ph"], job["ts"], job["dur"], job["pid"], job["tid"]) == ("X", 0.0, 1.5e6, 1, 1)
    steal = next(e for e in events if e.get("cat") == "steal")
    assert (steal["ts"], steal["pid"], steal["tid"]) == (1e6, 2, 3)
    instant = next(e for e in events if e.get("cat") == "recovery")
    assert instant["ph"] == "i" and instant["ts"] == 0.5e6 and "dur" not in instant


def test_trace_messages_round_trip_through_the_codec() -> None:
    events = [TraceEvent(trace.COMPUTE, "job", "fib", 1.5, 0.25, "3 jobs")]
    for msg in (
        m.TraceRequest(7, "run", "m1/0"),
        m.TraceReply(7, "run", "m1/0", events, 2, ["m1/1"]),
    ):
        assert codec.decode_message(codec.encode_message(msg)) == msg


def test_recovery_watch_records_restarts_reuse_new_masters_and_drains() -> None:
    from types import SimpleNamespace

    from satind.node.tracing import RecoveryWatch

    info = SimpleNamespace(master="m1/0", epoch=0)
    state = SimpleNamespace(
        runs=SimpleNamespace(active={"r": SimpleNamespace(info=info)}),
        steal=SimpleNamespace(jobs_restarted=0),
        orphans=SimpleNamespace(counters=SimpleNamespace(results_reused=0)),
        draining=False,
    )
    peer = SimpleNamespace(state=state, traces=trace.Traces(TraceConfig()))
    watch = RecoveryWatch()
    watch.check(peer)
    assert peer.traces.get("r") is None  # nothing happened yet
    state.steal.jobs_restarted = 4
    state.orphans.counters.results_reused = 2
    info.master, info.epoch = "m1/1", 1
    state.draining = True
    watch.check(peer)
    watch.check(peer)  # nothing new: nothing recorded twice
    ring = peer.traces.get("r")
    assert ring is not None
    assert sorted((e.name, e.detail) for e in ring.events) == [
        ("drain", ""),
        ("jobs restarted", "4 put back"),
        ("new master", "m1/1, epoch 1"),
        ("orphans reused", "2 results"),
    ]
