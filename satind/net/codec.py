"""CBOR <-> messages, with strict validation and size caps; application values; framing.

Frames are a 4-byte big-endian length followed by that many bytes of CBOR. A message is a CBOR
map ``{"t": type code, field: value, ...}``. Decoding checks every field against the
dataclass's type hints: a wrong type, a missing field, an unknown field or an unknown type code
raises ``DecodeError``, which the transport turns into closing that one connection.

Every value a message carries is bounded here, so that no code downstream meets a value it
cannot handle: an integer field holds a 64-bit integer (a 5,000-digit integer cannot be
printed by CPython, and ``float()`` of a larger one overflows), a float field a finite float,
a message nests at most ``net.max_message_depth`` levels and holds at most ``net.max_items``
CBOR items (counted before cbor2 builds any object, so a frame of millions of tiny items costs
a scan, not gigabytes). Error messages describe an offending value without formatting it
whole (``describe``).

Application values use their own encoding (``encode_value``/``decode_value``): plain CBOR plus
a tag that keeps tuples tuples (a stolen job must see the same argument types as a local one)
and tags that plugins register for their own types. Nothing is ever pickled.
"""

from __future__ import annotations

import dataclasses
import io
import struct
import types
import typing
from collections.abc import Callable
from typing import Any

import cbor2

from satind.net import messages as m
from satind.net.errors import DecodeError as DecodeError
from satind.net.errors import EncodeError as EncodeError

# Application values (job arguments, results) have their own encoding, in values.py; they are
# re-exported here, where the rest of the wire format is.
from satind.net.values import ENVELOPE_BYTES as ENVELOPE_BYTES
from satind.net.values import TUPLE_TAG as TUPLE_TAG
from satind.net.values import Encoded as Encoded
from satind.net.values import decode_value as decode_value
from satind.net.values import encode_value as encode_value
from satind.net.values import register_type as register_type
from satind.net.values import version_of as version_of

FRAME_HEADER = struct.Struct(">I")
# bytes. The largest Hello accepted: it comes before the remote has said who it is, so no
# budget can be charged for it yet. A Hello is a version, a name, a cluster and a role
# (under 200 bytes with any names a certificate carries); a longer one closes the connection.
HELLO_MAX_BYTES = 4096


# -- validation built once from the type hints -----------------------------------------------

Check = Callable[[Any], Any]


def _identity(value: Any) -> Any:
    return value


# The range of every integer field: 64 bits, signed or unsigned (counters, ports, sequence
# numbers and process start times in nanoseconds all fit).
INT_MIN = -(2**63)
INT_MAX = 2**64 - 1


def describe(value: Any, limit: int = 60) -> str:
    """A short description of any received value, for error messages and logs. Never raises:
    a huge integer is described by its size (CPython refuses to print one of more than 4,300
    digits), anything else by a truncated repr."""
    if type(value) is int and not INT_MIN <= value <= INT_MAX:
        return f"an integer of {value.bit_length()} bits"
    try:
        shown = repr(value) if not isinstance(value, str | bytes) else repr(value[: limit + 1])
    except Exception:  # a hostile value whose repr fails is still only a value
        return f"a {type(value).__name__}"
    if len(shown) > limit:
        shown = shown[: limit - 3] + "..."
    return f"{type(value).__name__} {shown}"


class _Invalid(DecodeError):
    """A field failed its check. The path to it is collected on the way up, so that valid
    input (the common case) costs no string formatting at all."""

    def __init__(self, expected: str, value: Any) -> None:
        super().__init__(expected)
        self.expected = expected
        self.value = value
        self.path: list[str] = []

    def describe(self, root: str) -> str:
        where = root + "".join(reversed(self.path))
        return f"{where}: expected {self.expected}, got {describe(self.value)}"


def _scalar(kind: type) -> Check:
    def check(value: Any) -> Any:
        # bool is an int in Python; a protocol int field must not accept True.
        if type(value) is not kind:
            raise _Invalid(kind.__name__, value)
        return value

    return check


def _int(value: Any) -> Any:
    if type(value) is not int or not INT_MIN <= value <= INT_MAX:
        raise _Invalid("int (64 bits)", value)
    return value


def _float(value: Any) -> Any:
    if type(value) is float:
        if value - value != 0.0:  # inf - inf and nan - nan are nan: not finite
            raise _Invalid("float (finite)", value)
        return value
    if type(value) is int and INT_MIN <= value <= INT_MAX:
        return float(value)
    raise _Invalid("float", value)


def _none(value: Any) -> Any:
    if value is not None:
        raise _Invalid("null", value)
    return None


def _checker(hint: Any) -> Check:
    origin = typing.get_origin(hint)
    if hint is float:
        return _float
    if hint is int:
        return _int
    if hint in (str, bytes, bool):
        return _scalar(hint)
    if hint is type(None):
        return _none
    if origin in (typing.Union, types.UnionType):
        options = [_checker(arg) for arg in typing.get_args(hint)]

        def check_union(value: Any) -> Any:
            errors = []
            for option in options:
                try:
                    return option(value)
                except _Invalid as exc:
                    errors.append(exc)
            # Report the option that got furthest (the longest path) as the reason.
            best = max(errors, key=lambda e: len(e.path))
            if not best.path:
                expected = " or ".join(e.expected for e in errors)
                raise _Invalid(expected, value)
            raise best

        return check_union
    if origin is list:
        (item_hint,) = typing.get_args(hint)
        item = _checker(item_hint)

        def check_list(value: Any) -> Any:
            if type(value) is not list:
                raise _Invalid("array", value)
            try:
                return [item(v) for v in value]
            except (_Invalid, _Structure) as exc:
                for i, v in enumerate(value):  # only on error: find which element failed
                    try:
                        item(v)
                    except (_Invalid, _Structure):
                        exc.path.append(f"[{i}]")
                        break
                raise

        return check_list
    if origin is dict:
        key_hint, value_hint = typing.get_args(hint)
        if key_hint is not str:
            raise TypeError(f"only str keys are supported, not {key_hint}")
        item = _checker(value_hint)

        def check_dict(value: Any) -> Any:
            if type(value) is not dict:
                raise _Invalid("map", value)
            out = {}
            for k, v in value.items():
                if type(k) is not str:
                    bad = _Invalid("str", k)
                    bad.path.append(" key")
                    raise bad
                try:
                    out[k] = item(v)
                except (_Invalid, _Structure) as exc:
                    exc.path.append(f".{k}")
                    raise
            return out

        return check_dict
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _record(hint)
    raise TypeError(f"unsupported field type {hint!r}")


class _Structure(DecodeError):
    """A record is missing fields or has unknown ones (reported with its path)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[str] = []


def _record(cls: type, top: bool = False) -> Check:
    hints = typing.get_type_hints(cls, vars(m))
    fields = list(dataclasses.fields(cls))
    checks = {f.name: _checker(hints[f.name]) for f in fields}
    if top:
        checks["t"] = _identity  # the type code, already read; dropped below
    required = frozenset(
        f.name
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    defaults = {f.name: f.default for f in fields if f.default is not dataclasses.MISSING}
    factories = {
        f.name: f.default_factory for f in fields if f.default_factory is not dataclasses.MISSING
    }
    name = cls.__name__

    def check_record(value: Any) -> Any:
        if type(value) is not dict:
            raise _Invalid(f"{name} map", value)
        kwargs = {}
        for key, raw in value.items():
            check = checks.get(key)
            if check is None:
                raise _Structure(f"unknown field {key!r}")
            try:
                kwargs[key] = check(raw)
            except (_Invalid, _Structure) as exc:
                exc.path.append(f".{key}")
                raise
        if top:
            del kwargs["t"]
        if len(kwargs) < len(fields):
            missing = required - kwargs.keys()
            if missing:
                raise _Structure(f"missing field(s) {', '.join(sorted(missing))}")
            for field_name, default in defaults.items():
                kwargs.setdefault(field_name, default)
            for field_name, factory in factories.items():
                if field_name not in kwargs:
                    kwargs[field_name] = factory()
        # Fill the frozen dataclass directly: its generated __init__ sets every field through
        # object.__setattr__, and messages have no __post_init__ to skip. Several times faster,
        # on the path of every message received.
        obj: Any = object.__new__(cls)
        obj.__dict__.update(kwargs)
        return obj

    return check_record


# type code -> message class
_BY_CODE: dict[int, type[m.Message]] = {}
for _cls in m.MESSAGE_TYPES:
    if _cls.TYPE in _BY_CODE:
        raise RuntimeError(f"type code {_cls.TYPE} used twice")
    _BY_CODE[_cls.TYPE] = _cls

# type code -> (validating constructor, message name). Each is built on the first message of
# its type, not at import: reading the type hints of every message and record cost each
# process (a peer, a daemon, every CLI command) about 0.08 CPU s of its ~0.85 s of imports.
# tests/net/test_codec.py builds them all.
_DECODERS: dict[int, tuple[Check, str]] = {}


def _decoder(code: int) -> tuple[Check, str] | None:
    entry = _DECODERS.get(code)
    if entry is None:
        cls = _BY_CODE.get(code)
        if cls is None:
            return None
        # Two threads may build one at once: the same checker, either kept.
        entry = _DECODERS[code] = (_record(cls, top=True), cls.__name__)
    return entry


# -- encoding, also built once from the type hints -------------------------------------------

Plain = Callable[[Any], Any]


def _plainer(hint: Any) -> Plain | None:
    """How to turn a value of this type into CBOR-ready data; None when it already is."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [(arg, _plainer(arg)) for arg in typing.get_args(hint)]
        records = [(arg, conv) for arg, conv in options if conv is not None]
        if not records:
            return None
        assert len(records) == 1, "one record per union is supported"
        record_type, record_conv = records[0]
        assert record_conv is not None
        convert: Plain = record_conv
        runtime_type = typing.get_origin(record_type) or record_type  # list[X] -> list
        return lambda v: convert(v) if isinstance(v, runtime_type) else v
    if origin is list:
        element = _plainer(typing.get_args(hint)[0])
        if element is None:
            return None
        each: Plain = element
        return lambda v: [each(x) for x in v]
    if origin is dict:
        value = _plainer(typing.get_args(hint)[1])
        if value is None:
            return None
        every: Plain = value
        return lambda v: {k: every(x) for k, x in v.items()}
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _record_plainer(hint)
    return None


def _record_plainer(cls: type) -> Plain:
    hints = typing.get_type_hints(cls, vars(m))
    convs = [(f.name, _plainer(hints[f.name])) for f in dataclasses.fields(cls)]
    nested = tuple((name, conv) for name, conv in convs if conv is not None)

    def plain(obj: Any) -> dict[str, Any]:
        out = dict(obj.__dict__)  # a dataclass's fields are its __dict__
        for name, conv in nested:
            out[name] = conv(out[name])
        return out

    return plain


# message class -> its plainer, built on the first message of its type (as _DECODERS).
_ENCODERS: dict[type, Plain] = {}


def _encoder(cls: type) -> Plain:
    plain = _ENCODERS.get(cls)
    if plain is None:
        code = getattr(cls, "TYPE", None)
        if not isinstance(code, int) or _BY_CODE.get(code) is not cls:
            raise KeyError(cls)  # not a message type
        plain = _ENCODERS[cls] = _record_plainer(cls)
    return plain


def encode_message(msg: m.Message) -> bytes:
    """The CBOR body of one message (no frame header)."""
    body = (_ENCODERS.get(type(msg)) or _encoder(type(msg)))(msg)
    body["t"] = msg.TYPE
    return bytes(cbor2.dumps(body))


# What a message may hold (net.max_message_depth and net.max_items; the defaults, for callers
# that decode what they wrote themselves, such as the checkpoint reader).
MESSAGE_DEPTH = 16
MESSAGE_ITEMS = 262_144


def decode_message(
    data: bytes, max_depth: int = MESSAGE_DEPTH, max_items: int = MESSAGE_ITEMS
) -> m.Message:
    """Decode and validate one message body.

    Raises:
        DecodeError: not CBOR, too deep or too many items, not a map with a known type code,
            or a field is wrong.
    """
    if len(data) > max_items:
        # Every item takes at least a byte: only a frame this long can hold too many.
        scan_items(data, max_items, max_depth)
    fp = io.BytesIO(data)
    try:
        body = cbor2.CBORDecoder(fp, max_depth=max_depth, allow_duplicate_keys=False).decode()
    except Exception as exc:  # cbor2 raises several types, all meaning "bad input"
        raise DecodeError(f"not valid CBOR: {describe(str(exc), 200)}") from None
    if fp.tell() != len(data):
        # One message per frame: trailing bytes mean a confused or hostile sender.
        raise DecodeError(f"not valid CBOR: {len(data) - fp.tell()} bytes after the message")
    if type(body) is not dict:
        raise DecodeError(f"message must be a map, got {type(body).__name__}")
    code = body.get("t")
    if type(code) is not int:
        raise DecodeError(f"message has no integer type code: {describe(code)}")
    entry = _DECODERS.get(code) or _decoder(code)  # the call only for a type's first message
    if entry is None:
        raise DecodeError(f"unknown message type {describe(code)}")
    decoder, name = entry
    try:
        result: m.Message = decoder(body)
    except _Invalid as exc:
        raise DecodeError(exc.describe(name)) from None
    except _Structure as exc:
        raise DecodeError(f"{name}{''.join(reversed(exc.path))}: {exc.problem}") from None
    return result


# Bytes that follow the initial byte of a CBOR head, by its additional information (24-27).
_ARG_BYTES = {24: 1, 25: 2, 26: 4, 27: 8}


def scan_items(data: bytes, max_items: int, max_depth: int) -> None:
    """Walk the CBOR structure of ``data`` without building it: count its items (every
    integer, string, array, map entry, tag, simple value) and its nesting.

    This is what makes a frame of millions of one-byte items cheap to refuse: cbor2 would
    build a Python object (tens of bytes) for each before anything could look at them. The
    walk stops at the first item over the cap. Malformed CBOR is left to cbor2 to report.

    Raises:
        DecodeError: more than ``max_items`` items or ``max_depth`` levels.
    """
    pos = 0
    end = len(data)
    items = 0
    # Items still expected at each open level (-1: an indefinite-length container, which a
    # break byte closes).
    stack: list[int] = [1]
    while stack and pos < end:
        if stack[-1] == 0:
            stack.pop()
            continue
        initial = data[pos]
        pos += 1
        if initial == 0xFF:  # break: closes the innermost indefinite container
            if stack[-1] != -1:
                return  # malformed: cbor2 says so
            stack.pop()
            continue
        if stack[-1] > 0:
            stack[-1] -= 1
        items += 1
        if items > max_items:
            raise DecodeError(f"message holds more than {max_items} items (net.max_items)")
        major = initial >> 5
        info = initial & 0x1F
        if info < 24:
            arg = info
        elif info in _ARG_BYTES:
            size = _ARG_BYTES[info]
            arg = int.from_bytes(data[pos : pos + size], "big")
            pos += size
        elif info == 31 and major in (2, 3, 4, 5):
            arg = -1
        else:
            return  # malformed or a float/simple value handled below
        if major in (2, 3):  # byte and text strings: skip their content
            if arg == -1:
                stack.append(-1)  # chunks follow, each a definite string
            else:
                pos += arg
        elif major in (4, 5, 6):
            count = 1 if major == 6 else arg * 2 if major == 5 and arg != -1 else arg
            if count:
                if len(stack) > max_depth:
                    raise DecodeError(f"message nests deeper than {max_depth} levels")
                stack.append(count)


def frame(body: bytes) -> bytes:
    """Length-prefix one message body."""
    return FRAME_HEADER.pack(len(body)) + body
