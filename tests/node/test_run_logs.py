"""RunLogs: lines of a run's output, whole lines only, bounded per run and numbered, each
with the time its peer wrote it."""

from __future__ import annotations

import itertools

from satind.config import RunConfig
from satind.node.logs import RunLogs


def _clock(start: float = 100.0) -> itertools.count[float]:
    """A wall clock that ticks one second per reading."""
    return itertools.count(start)


def _lines(taken: list[tuple[float, str]]) -> list[str]:
    return [line for _, line in taken]


def test_print_writes_whole_lines_once_the_newline_comes() -> None:
    logs = RunLogs(RunConfig(), "p")
    logs.capture("r", "hello")  # print() writes the text, then the newline
    assert logs.take() == {}
    logs.capture("r", "\n")
    logs.capture("r", "a\nb\r\nc")
    assert {k: _lines(v) for k, v in logs.take().items()} == {"r": ["hello", "a", "b"]}
    # An unfinished line still there at the next take is sent as it is.
    assert {k: _lines(v) for k, v in logs.take().items()} == {"r": ["c"]}
    assert logs.take() == {}


def test_a_line_is_stamped_when_its_first_part_was_written() -> None:
    clock = _clock()
    logs = RunLogs(RunConfig(), "p", clock=lambda: next(clock))
    logs.capture("r", "hel")  # at 100
    logs.capture("r", "lo\nnext")  # at 101: "hello" began at 100, "next" at 101
    logs.capture("r", " line\n")  # at 102
    logs.capture("s", "other\n")  # at 103
    assert logs.take() == {"r": [(100.0, "hello"), (101.0, "next line")], "s": [(103.0, "other")]}
    logs.capture("r", "unfinished")  # at 104, still unfinished at the next take: sent as is
    assert logs.take() == {}
    assert logs.take() == {"r": [(104.0, "unfinished")]}


def test_a_peer_keeps_run_log_lines_per_run_and_counts_the_rest() -> None:
    logs = RunLogs(RunConfig(log_lines=3, log_line_chars=5), "p", clock=lambda: 7.0)
    logs.capture("r", "".join(f"line{i}xxxx\n" for i in range(5)))
    logs.capture("s", "one\n")
    taken = logs.take()
    assert taken["r"] == [
        (7.0, "line0"),
        (7.0, "line1"),
        (7.0, "line2"),
        (7.0, "[2 lines dropped: run.log_lines is 3 per peer]"),
    ]
    assert taken["s"] == [(7.0, "one")]


def test_the_master_keeps_the_newest_lines_and_numbers_them() -> None:
    logs = RunLogs(RunConfig(log_lines=3, keep_results=2), "m")
    logs.keep("r", "p1", [(1.0, "a"), (2.0, "b")])
    assert logs.since("r", 0) == ([(1.0, "p1: a"), (2.0, "p1: b")], 2)
    logs.keep("r", "p2#x1", [(1.5, "c"), (3.0, "d")])
    # "a" fell out: line 1 is the oldest kept; a follower at 2 gets only what is new. Lines
    # keep the order they came in and the times their peers gave them; they name the slot.
    assert logs.since("r", 0) == ([(2.0, "p1: b"), (1.5, "p2: c"), (3.0, "p2: d")], 4)
    assert logs.since("r", 2) == ([(1.5, "p2: c"), (3.0, "p2: d")], 4)
    assert logs.since("r", 4) == ([], 4)
    assert logs.since("unknown", 0) == ([], 0)
    # Runs are kept like results: the oldest run's lines go first.
    logs.keep("s", "p1", [(4.0, "x")])
    logs.keep("t", "p1", [(5.0, "y")])
    assert "r" not in logs.kept
    assert logs.since("t", 0) == ([(5.0, "p1: y")], 1)
