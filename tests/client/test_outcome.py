"""What `satind result` and `satind run` print for a run without a value (issue 32, point 3):
a cancelled run's message once, not as a failure with its message repeated as a trace; and a
finished run's outcome asked twice from the Python API."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from satind.client.api import Outcome
from satind.client.runner import Failure, outcome_of
from satind.client.sync import SyncRun
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


class _Loop:
    """The client's loop thread, as far as SyncRun asks it: each call runs at once."""

    def call(self, fn: Any, *args: Any) -> Any:
        return trio.run(fn, *args)


def test_outcome_after_result_answers_at_once_without_a_second_progress_bar(
    capsys: pytest.CaptureFixture[str],
) -> None:
    class Run:
        id = "r-1"
        waits = 0

        async def outcome(self, update: Any = None) -> Outcome:
            Run.waits += 1
            if update is not None:
                update(1.0)
            return Outcome("r-1", 42, 42, "ok", 0.1, 2)

    run = SyncRun(_Loop(), Run())  # type: ignore[arg-type]  # a run as far as it is asked
    assert run.result(progress=True) == 42
    drawn = capsys.readouterr().err
    assert "run r-1" in drawn
    assert run.outcome(progress=True).value == 42
    assert Run.waits == 1 and capsys.readouterr().err == ""


def test_a_failed_runs_outcome_asked_again_raises_at_once() -> None:
    class Run:
        id = "r-2"
        waits = 0

        async def outcome(self, update: Any = None) -> Outcome:
            Run.waits += 1
            raise ValueError("the job's own")

    run = SyncRun(_Loop(), Run())  # type: ignore[arg-type]
    for _ in range(2):
        with pytest.raises(ValueError, match="the job's own"):
            run.outcome(progress=False)
    assert Run.waits == 1
