"""Failures on the wire: what crosses is bounded, whatever the failure looked like."""

from __future__ import annotations

from satind.net import codec
from satind.net import messages as m
from satind.work.errors import (
    MESSAGE_CHARS,
    TRACEBACK_CHARS,
    RemoteJobError,
    error_info,
    exception_from,
)


def _deep(n: int) -> None:
    if n:
        _deep(n - 1)
    raise ValueError("x" * 100_000)


def test_a_deep_failure_with_a_long_message_fits_in_a_message() -> None:
    try:
        _deep(800)
    except ValueError as exc:
        info = error_info(exc)
    # The innermost frames are kept (where it was raised), the rest cut.
    assert "_deep" in info.traceback and "raise ValueError" in info.traceback
    assert len(info.traceback) <= TRACEBACK_CHARS + 64
    assert info.traceback.count("_deep(n - 1)") < 30
    assert len(info.message) <= MESSAGE_CHARS + 64
    assert info.message.endswith("x" * 100)
    # ... and the whole failure fits a small frame.
    reply = m.ErrorReply(1, info)
    assert len(codec.encode_message(reply)) < 64 * 1024


def test_a_failure_arrives_as_its_builtin_type_or_as_remote_job_error() -> None:
    try:
        raise KeyError("k")
    except KeyError as exc:
        back = exception_from(error_info(exc))
    assert type(back) is KeyError

    class Mine(Exception):
        pass

    try:
        raise Mine("mine")
    except Mine as exc:
        other = exception_from(error_info(exc))
    assert isinstance(other, RemoteJobError) and other.message == "mine"
    assert "Mine" in other.type_name
