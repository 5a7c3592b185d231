"""RunLogs: lines of a run's output, whole lines only, bounded per run and numbered."""

from __future__ import annotations

from satind.config import RunConfig
from satind.node.logs import RunLogs


def test_print_writes_whole_lines_once_the_newline_comes() -> None:
    logs = RunLogs(RunConfig(), "p")
    logs.capture("r", "hello")  # print() writes the text, then the newline
    assert logs.take() == {}
    logs.capture("r", "\n")
    logs.capture("r", "a\nb\r\nc")
    assert logs.take() == {"r": ["hello", "a", "b"]}
    # An unfinished line still there at the next take is sent as it is.
    assert logs.take() == {"r": ["c"]}
    assert logs.take() == {}


def test_a_peer_keeps_run_log_lines_per_run_and_counts_the_rest() -> None:
    logs = RunLogs(RunConfig(log_lines=3, log_line_chars=5), "p")
    logs.capture("r", "".join(f"line{i}xxxx\n" for i in range(5)))
    logs.capture("s", "one\n")
    taken = logs.take()
    assert taken["r"] == [
        "line0",
        "line1",
        "line2",
        "[2 lines dropped: run.log_lines is 3 per peer]",
    ]
    assert taken["s"] == ["one"]


def test_the_master_keeps_the_newest_lines_and_numbers_them() -> None:
    logs = RunLogs(RunConfig(log_lines=3, keep_results=2), "m")
    logs.keep("r", "p1", ["a", "b"])
    assert logs.since("r", 0) == (["p1: a", "p1: b"], 2)
    logs.keep("r", "p2", ["c", "d"])
    # "a" fell out: line 1 is the oldest kept; a follower at 2 gets only what is new.
    assert logs.since("r", 0) == (["p1: b", "p2: c", "p2: d"], 4)
    assert logs.since("r", 2) == (["p2: c", "p2: d"], 4)
    assert logs.since("r", 4) == ([], 4)
    assert logs.since("unknown", 0) == ([], 0)
    # Runs are kept like results: the oldest run's lines go first.
    logs.keep("s", "p1", ["x"])
    logs.keep("t", "p1", ["y"])
    assert "r" not in logs.kept
    assert logs.since("t", 0) == (["p1: y"], 1)
