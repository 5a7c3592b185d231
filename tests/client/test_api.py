"""The client API's own decisions, without a cluster: what a submission becomes, which
plugin a function belongs to, which exception a failed run raises."""

from __future__ import annotations

import dataclasses
import re
import sys
import types
from pathlib import Path

import pytest
from satind_plugins.fib import PLUGIN as FIB
from satind_plugins.fib import fib, fib_seq

import satind
from satind.client.errors import (
    BadArguments,
    Refused,
    RunCancelled,
    RunFailed,
    RunSuspended,
    run_error,
)
from satind.client.submission import plugin_of, submission
from satind.net import codec
from satind.net import messages as m
from satind.plugin import UsageError
from satind.work.errors import error_info, exception_from

MAX_FRAME = 64 * 1024 * 1024


def test_by_name_the_arguments_are_command_line_strings() -> None:
    assert submission("nqueens", ["12", 3], MAX_FRAME) == ("nqueens", ["12", "3"], "", b"")
    with pytest.raises(TypeError, match="submit the plugin's @spawnable function"):
        submission("nqueens", [[1, 2]], MAX_FRAME)


def test_a_function_travels_as_its_plugin_name_qualname_and_encoded_values() -> None:
    plugin, argv, entry, values = submission(fib, [20, 10], MAX_FRAME)
    assert (plugin, argv, entry) == ("fib", [], "fib")
    assert codec.decode_value(values) == (20, 10)
    assert plugin_of(fib) is FIB


def test_what_cannot_be_submitted_is_refused_here_saying_why() -> None:
    with pytest.raises(TypeError, match=r"@satind\.spawnable"):
        submission(fib_seq, [3], MAX_FRAME)  # a plain function
    with pytest.raises(BadArguments, match="cannot be sent") as caught:
        submission(fib, [b"x" * 10_000], 8_000)  # larger than a frame
    assert isinstance(caught.value, UsageError) and isinstance(caught.value, Refused)
    with pytest.raises(BadArguments, match="cannot be sent"):
        submission(fib, [object()], MAX_FRAME)  # no codec for it

    lonely = types.ModuleType("lonely_module")
    sys.modules["lonely_module"] = lonely
    try:

        def work(n: int) -> int:
            return n

        work.__module__ = "lonely_module"
        work.__qualname__ = "work"
        with pytest.raises(ValueError, match="not part of a plugin"):
            submission(satind.spawnable(work), [1], MAX_FRAME)
    finally:
        del sys.modules["lonely_module"]


def test_a_function_inside_a_function_is_refused() -> None:
    @satind.spawnable
    def inner(n: int) -> int:
        return n

    with pytest.raises(ValueError, match="inside a function"):
        submission(inner, [1], MAX_FRAME)


def test_the_master_finds_only_top_level_spawnables_of_the_plugins_module() -> None:
    assert FIB.function("fib") is fib
    for name in ("fib_seq", "nothing", "__builtins__", "fib.__wrapped__", "sync"):
        with pytest.raises(UsageError, match="no @spawnable function"):
            FIB.function(name)


class Mistake(Exception):
    pass


def test_a_run_error_is_raised_as_itself_when_it_can_be_rebuilt_here() -> None:
    builtin = run_error("r", m.ErrorInfo("ZeroDivisionError", "division by zero", "tb"))
    assert type(builtin) is ZeroDivisionError
    assert "remote traceback:\ntb" in builtin.__notes__[0]
    # A class of a module this process imported, under its own name...
    mine = run_error("r", m.ErrorInfo(f"{__name__}.Mistake", "oops", ""))
    assert type(mine) is Mistake and str(mine) == "oops"
    # ... or under the name the peers give a plugin file (satind_path_plugins.<stem>).
    stem = __name__.rsplit(".", 1)[-1]
    path = run_error("r", m.ErrorInfo(f"satind_path_plugins.{stem}.Mistake", "oops", ""))
    assert type(path) is Mistake
    unknown = run_error("r", m.ErrorInfo("elsewhere.Unheard", "what", "remote tb"))
    assert isinstance(unknown, RunFailed) and unknown.type_name == "elsewhere.Unheard"
    assert unknown.remote_traceback == "remote tb"
    assert isinstance(run_error("r", m.ErrorInfo("RunCancelled", "c", "")), RunCancelled)
    assert isinstance(run_error("r", m.ErrorInfo("RunSuspended", "s", "")), RunSuspended)


class OutOfRange(Exception):
    """An exception with a constructor of its own (rebuilt as ``cls(message)`` it failed)."""

    def __init__(self, index: int, size: int) -> None:
        super().__init__(index, size)
        self.index, self.size = index, size

    def __str__(self) -> str:
        return f"{self.index} is past {self.size}"


def test_an_exception_with_its_own_constructor_comes_back_from_its_args() -> None:
    try:
        raise OutOfRange(7, 5)
    except OutOfRange as exc:
        info = error_info(exc)  # as a peer sends it
    assert info.value is None and info.args is not None  # not registered: its args travel
    back = run_error("r", info)
    assert type(back) is OutOfRange and (back.index, back.size) == (7, 5)
    assert str(back) == "7 is past 5"
    # A built-in one with several args, as raised.
    try:
        raise OSError(2, "No such file or directory")
    except OSError as exc:
        again = exception_from(error_info(exc))
    assert type(again) is FileNotFoundError and again.errno == 2
    # Args that cannot travel: from its message, as before.
    try:
        raise Mistake(object())
    except Mistake as exc:
        info = error_info(exc)
    assert info.args is None and type(run_error("r", info)) is Mistake


def test_the_client_names_are_on_the_package_without_importing_it_for_peers() -> None:
    assert satind.connect is satind.client.sync.connect
    assert issubclass(satind.Timeout, TimeoutError)
    assert issubclass(satind.PeerUnavailable, ConnectionError)
    with pytest.raises(AttributeError):
        satind.no_such_name  # noqa: B018


def test_the_run_records_fields_docs_client_md_names_are_its_fields() -> None:
    """docs/client.md once named `RunRecord.id`; the field is `run_id`."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "client.md").read_text()
    start = text.index("`satind.client.api.RunRecord`s:")
    named = re.findall(r"`(\w+)`", text[start : text.index(";", start)])
    assert len(named) >= 10, named
    fields = {f.name for f in dataclasses.fields(m.RunRecord)}  # satind.client.api.RunRecord
    assert set(named) - {"history"} <= fields, set(named) - fields
