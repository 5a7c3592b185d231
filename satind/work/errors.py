"""Exceptions that cross peers: raised in a job on one peer, re-raised by result() on another.

Exceptions are never pickled. A job's exception travels as its type name, message and
formatted traceback (messages.ErrorInfo). On arrival:

* an exception of a type a plugin registered (``satind.register_type``, the codec's type
  registry) also travels as an application value and is rebuilt as itself, with its fields:
  this is how a search returns a result through an exception to an inlet (api.spawn_inlet,
  satin-grid-programming-model §3.3);
* a built-in exception type is rebuilt as itself (its message only), so ``except ValueError``
  in a plugin works the same for local and stolen children;
* anything else becomes ``RemoteJobError``.

Either way the remote traceback is attached as a note, so the user sees where it really
failed.
"""

from __future__ import annotations

import builtins
import traceback
from typing import Any

from satind.net.errors import DecodeError, EncodeError
from satind.net.messages import ErrorInfo
from satind.net.values import decode_value, encode_value, is_registered


class LimitExceeded(RuntimeError):
    """A run went past a bound that protects the peer (engine.recursion_limit,
    engine.max_pending_jobs, net.max_frame_bytes): the job fails with this, and so does its
    run, unless the plugin catches it. The message names the setting."""


class JobAborted(Exception):
    """``result()`` of a child that was aborted (its spawner called ``satind.abort()``, or an
    inlet of its spawner raised) before it finished: it has no result."""


def aborted() -> JobAborted:
    """What result() of an aborted child raises (a new one each time: an exception raised
    again keeps growing its traceback)."""
    return JobAborted(
        "this child was aborted (its spawner called satind.abort(), or an inlet of its "
        "spawner raised) before it finished: it has no result"
    )


class RemoteJobError(Exception):
    """A job raised an exception of a type that cannot be rebuilt here.

    Attributes:
        type_name: the qualified name of the original exception type.
        remote_traceback: the traceback as formatted where the job ran.
    """

    def __init__(self, type_name: str, message: str, remote_traceback: str = "") -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message
        self.remote_traceback = remote_traceback


# A failure's traceback travels with it, bounded: the innermost frames (where it was raised)
# and a cap on its text. A recursion that met the limit would otherwise send thousands of
# identical frames (megabytes, more than a frame may carry) and the failure would be lost.
TRACEBACK_FRAMES = 24
TRACEBACK_CHARS = 16 * 1024
MESSAGE_CHARS = 4 * 1024
# The most an exception of a registered type may weigh, encoded, to travel as itself (beside
# its traceback, in one result message). A larger one arrives as a RemoteJobError.
VALUE_BYTES = 1024 * 1024 + 64 * 1024
# bytes. An exception's args travel (ErrorInfo.args) up to this size encoded; past it, it is
# rebuilt from its bounded message.
ARGS_BYTES = 8 * 1024


def _bounded(text: str, limit: int) -> str:
    """``text`` with its middle cut if longer than ``limit``: a traceback's frames come
    first and its exception's message last, and both matter."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def format_traceback(exc: BaseException) -> str:
    """The traceback of ``exc`` as sent: its innermost frames, its text capped."""
    return _bounded(
        "".join(traceback.format_exception(exc, limit=-TRACEBACK_FRAMES)), TRACEBACK_CHARS
    )


def error_info(exc: BaseException) -> ErrorInfo:
    """Describe an exception for the wire (traceback and message bounded)."""
    info = _error_info(exc)
    value = None
    if is_registered(type(exc)):
        try:
            value = encode_value(exc, VALUE_BYTES)
        except EncodeError:
            value = None  # too large or not encodable: it arrives as a RemoteJobError
    args = None
    # A RemoteJobError's args are its own wrapping ("mod.Type: message"), not the args the
    # job raised with: relayed, it is rebuilt from its message, as before args travelled.
    if value is None and exc.args and not isinstance(exc, RemoteJobError):
        try:
            args = encode_value(tuple(exc.args), VALUE_BYTES)
        except EncodeError:
            args = None  # not plain data: rebuilt from its message, where it can be
        if args is not None and len(args) > ARGS_BYTES:
            args = None  # from its bounded message: a failure stays a small frame
    return ErrorInfo(
        info.type[:MESSAGE_CHARS],
        _bounded(info.message, MESSAGE_CHARS),
        _bounded(info.traceback, TRACEBACK_CHARS),
        value,
        args,
    )


def _error_info(exc: BaseException) -> ErrorInfo:
    tb = format_traceback(exc)
    if isinstance(exc, RemoteJobError):
        return ErrorInfo(exc.type_name, exc.message, exc.remote_traceback or tb)
    remote = getattr(exc, "_satind_remote_traceback", None)
    if remote:
        # Rebuilt built-in exception passing through: keep the original traceback.
        tb = remote
    cls = type(exc)
    name = (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )
    return ErrorInfo(name, str(exc), tb)


def exception_from(info: ErrorInfo) -> Exception:
    """Rebuild an exception that arrived from another peer."""
    cls = getattr(builtins, info.type, None)
    exc: Exception
    if info.value is not None and (rebuilt := _registered(info)) is not None:
        exc = rebuilt
    elif isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == "builtins":
        try:
            exc = cls(*arguments(info))  # OSError(2, "..."), KeyError("k"): as raised
        except Exception:
            exc = RemoteJobError(info.type, info.message, info.traceback)
    else:
        exc = RemoteJobError(info.type, info.message, info.traceback)
    if info.traceback:
        exc._satind_remote_traceback = info.traceback  # type: ignore[attr-defined]
        exc.add_note("remote traceback:\n" + info.traceback.rstrip())
    return exc


def arguments(info: ErrorInfo) -> tuple[Any, ...]:
    """What to call an exception's class with to rebuild it: its args as raised, when they
    travelled (plain data), else its message."""
    if info.args is not None:
        try:
            args = decode_value(info.args)
        except DecodeError:
            args = None
        if isinstance(args, tuple):
            return args
    return (info.message,)


def _registered(info: ErrorInfo) -> Exception | None:
    """The exception an ErrorInfo carries as a value, if it decodes here to an exception (its
    type registered on this peer too); None otherwise."""
    assert info.value is not None
    try:
        value = decode_value(info.value)
    except DecodeError:
        return None
    return value if isinstance(value, Exception) else None


class ResultNotReady(RuntimeError):
    """``handle.result()`` was called before the ``sync()`` that waits for the job."""
