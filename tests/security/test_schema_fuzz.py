"""Hostile values in every field of every message type, drawn from the message schema itself:
integers far past 64 bits (a 5,000-digit one cannot even be printed by CPython), integers that
overflow ``float()``, infinities and NaNs, nesting a thousand levels deep, and values of the
wrong type. Against the decoder alone, each is a valid message or a DecodeError, never another
exception; against a real peer over mutual TLS, each costs at most its own connection and the
peer keeps serving."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any

import cbor2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from satind.net import codec
from satind.net import messages as m
from tests.security.live import LivePeer, live, read_frames, still_serves, tls_client

__all__ = ["live"]  # the fixture, used by name

HUGE_INTS = st.sampled_from([2**64, -(2**63) - 1, 2**1100, 10**5000, -(10**5000)])
BAD_FLOATS = st.sampled_from([math.inf, -math.inf, math.nan])


def _deep(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


JUNK = st.one_of(
    HUGE_INTS,
    BAD_FLOATS,
    st.integers(min_value=400, max_value=1500).map(_deep),
    st.none(),
    st.booleans(),
    st.text(max_size=5),
    st.binary(max_size=5),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=3),
)


def _hostile(hint: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values for a field of type ``hint``: mostly well-formed, often hostile."""
    return st.one_of(_wellformed(hint, depth), JUNK) if depth < 4 else JUNK


def _wellformed(hint: Any, depth: int) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(hint)
    if hint is int:
        return st.one_of(st.integers(min_value=-(2**63), max_value=2**64 - 1), HUGE_INTS)
    if hint is float:
        return st.one_of(st.floats(), HUGE_INTS)  # an int in a float field is converted
    if hint is str:
        return st.text(max_size=8)
    if hint is bytes:
        return st.binary(max_size=8)
    if hint is bool:
        return st.booleans()
    if hint is type(None):
        return st.none()
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*[_hostile(arg, depth + 1) for arg in typing.get_args(hint)])
    if origin is list:
        return st.lists(_hostile(typing.get_args(hint)[0], depth + 1), max_size=3)
    if origin is dict:
        return st.dictionaries(
            st.text(max_size=4), _hostile(typing.get_args(hint)[1], depth + 1), max_size=3
        )
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _record(hint, depth + 1)
    raise TypeError(hint)


def _record(cls: type, depth: int) -> st.SearchStrategy[dict[str, Any]]:
    hints = typing.get_type_hints(cls, vars(m))
    return st.fixed_dictionaries(
        {},
        optional={f.name: _hostile(hints[f.name], depth) for f in dataclasses.fields(cls)},
    )


def _message(cls: type[m.Message]) -> st.SearchStrategy[bytes]:
    return _record(cls, 0).map(lambda fields: cbor2.dumps({"t": cls.TYPE, **fields}))


BODIES = st.one_of(*[_message(cls) for cls in m.MESSAGE_TYPES])


def _in_range(value: Any) -> bool:
    """Every integer within 64 bits and every float finite, however deep."""
    if type(value) is int:
        return codec.INT_MIN <= value <= codec.INT_MAX
    if type(value) is float:
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_in_range(v) for v in value)
    if isinstance(value, dict):
        return all(_in_range(v) for v in value.values())
    if dataclasses.is_dataclass(value):
        return all(_in_range(getattr(value, f.name)) for f in dataclasses.fields(value))
    return True


@settings(max_examples=1500, deadline=None)
@given(BODIES)
def test_the_decoder_accepts_a_message_or_raises_decode_error(body: bytes) -> None:
    try:
        msg = codec.decode_message(body)
    except codec.DecodeError as exc:
        assert str(exc)  # the reason can be printed, whatever the offending value was
        return
    assert _in_range(msg)
    str(msg)  # and a message that passed can be logged


def test_the_huge_values_of_the_report_are_refused_with_a_printable_reason() -> None:
    huge = cbor2.dumps({"t": m.StealRequest.TYPE, "req": 10**5000, "wide": False})
    with pytest.raises(codec.DecodeError, match=r"integer of \d+ bits"):
        codec.decode_message(huge)
    overflow = cbor2.dumps(
        {"t": m.ProgressReply.TYPE, "req": 1, "run_id": "r", "progress": 2**1100, "counters": {}}
    )
    with pytest.raises(codec.DecodeError, match="progress"):
        codec.decode_message(overflow)
    version = cbor2.dumps(
        {"t": m.Hello.TYPE, "version": 10**5000, "sender": "x", "cluster": "", "role": "client"}
    )
    with pytest.raises(codec.DecodeError, match="version"):
        codec.decode_message(version)


def test_millions_of_tiny_items_are_refused_before_cbor2_builds_them() -> None:
    # A 2 MB array of one-byte integers: cbor2 would build two million objects.
    body = (
        b"\xa2\x61t\x18\x3c\x63req" + b"\x9a" + (2_000_000).to_bytes(4, "big") + b"\x00" * 2_000_000
    )
    with pytest.raises(codec.DecodeError, match=r"net\.max_items"):
        codec.decode_message(body)
    deep = b"\xa1\x61t" + b"\x81" * 100_000 + b"\x00"
    with pytest.raises(codec.DecodeError, match="deeper"):
        codec.decode_message(deep, max_items=1000)


# What a client may send and that would stop the peer under test if valid: covered by the
# decoder test above, not sent to the live peer.
STOPPING = (m.Shutdown, m.StopRequest, m.DrainRequest)
LIVE_BODIES = st.one_of(*[_message(c) for c in m.MESSAGE_TYPES if c not in STOPPING])


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(LIVE_BODIES)
def test_hostile_fields_cost_a_real_peer_one_connection_at_most(
    live: LivePeer, body: bytes
) -> None:
    with tls_client(live) as sock:
        sock.sendall(codec.FRAME_HEADER.pack(len(body)) + body)
        read_frames(sock, 2, timeout=5)  # its Hello, and an answer or the close
    assert not live.peer.stopped.is_set()


def test_the_peer_still_serves_after_the_fuzzing(live: LivePeer) -> None:
    assert still_serves(live)
    assert not live.peer.stopped.is_set()
