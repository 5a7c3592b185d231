"""What `satind result` and `satind run` print for a run without a value (issue 32, point 3):
a cancelled run's message once, not as a failure with its message repeated as a trace."""

from __future__ import annotations

from satind.client.runner import Failure, outcome_of
from satind.config import Config
from satind.net import messages as m


def _result(kind: str, message: str, trace: str = "") -> m.RunResult:
    return m.RunResult("r-1", None, m.ErrorInfo(kind, message, trace), 1.0, 2, {})


def test_a_cancelled_run_is_said_once() -> None:
    out = outcome_of(_result("RunCancelled", "run r-1 was cancelled"), Config())
    assert isinstance(out, Failure)
    assert out.message == "run r-1 was cancelled"


def test_a_failed_run_gives_its_trace_and_no_line_twice() -> None:
    traced = outcome_of(_result("ValueError", "bad", "Traceback ...\nValueError: bad"), Config())
    assert isinstance(traced, Failure)
    assert traced.message == "run r-1 failed: ValueError: bad\nTraceback ...\nValueError: bad"
    bare = outcome_of(_result("ValueError", "bad"), Config())
    assert isinstance(bare, Failure) and bare.message == "run r-1 failed: ValueError: bad"
