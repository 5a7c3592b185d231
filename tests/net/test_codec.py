"""The codec: round trips of values and messages, and rejection of malformed input."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import typing
from typing import Any

import cbor2
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from satind.config import NetConfig
from satind.net import codec
from satind.net import messages as m
from satind.net import values as values_mod
from satind.net.framing import FrameReader

# -- application values --------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20)
)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.lists(children, max_size=5).map(tuple)
        | st.dictionaries(st.text(max_size=5), children, max_size=5)
    ),
    max_leaves=30,
)


@given(values)
def test_value_round_trip_keeps_types(value: Any) -> None:
    back = codec.decode_value(codec.encode_value(value))
    assert back == value
    assert _shape(back) == _shape(value)  # tuples stay tuples, lists stay lists


@given(values)
def test_plain_values_take_the_fast_path_to_the_same_bytes(value: Any) -> None:
    # encode_value skips cbor2's (slow) per-type lookup when no tuple or other non-plain
    # type is anywhere in the value: the bytes must be what the general path writes.
    general = cbor2.dumps(value, encoders={tuple: values_mod._encode_tuple})
    assert codec.encode_value(value) == general
    assert values_mod._plain(value) == (not _has_tuple(value))


def _has_tuple(value: Any) -> bool:
    if isinstance(value, tuple):
        return True
    if isinstance(value, list):
        return any(_has_tuple(v) for v in value)
    if isinstance(value, dict):
        return any(_has_tuple(k) or _has_tuple(v) for k, v in value.items())
    return False


def test_shared_and_cyclic_lists_take_the_general_path() -> None:
    row = [1.0, 2.0]
    assert not values_mod._plain([row, row])
    assert codec.decode_value(codec.encode_value([row, row])) == [row, row]
    loop: list[Any] = [1]
    loop.append(loop)
    with pytest.raises(codec.EncodeError):
        codec.encode_value(loop)
    assert values_mod._plain({1: [2.5, "x", b"y", None, True, 2**80], "k": {}})
    assert not values_mod._plain({(1, 2): 3})
    assert not values_mod._plain([{1, 2}])


def _shape(value: Any) -> Any:
    if isinstance(value, tuple):
        return ("tuple", [_shape(v) for v in value])
    if isinstance(value, list):
        return ("list", [_shape(v) for v in value])
    if isinstance(value, dict):
        return ("dict", {k: _shape(v) for k, v in value.items()})
    return type(value).__name__


def test_sets_and_big_ints_travel() -> None:
    value = ({1, 2, 3}, 2**200, -(2**70))
    assert codec.decode_value(codec.encode_value(value)) == value


def test_unregistered_objects_are_refused_with_a_hint() -> None:
    class Point:
        pass

    with pytest.raises(codec.EncodeError, match="register_type"):
        codec.encode_value([Point()])


@dataclasses.dataclass(frozen=True)
class Vec:
    x: float
    y: float


def test_registered_type_round_trip() -> None:
    codec.register_type(Vec, 40001, lambda v: [v.x, v.y], lambda p: Vec(*p))
    value = (Vec(1.0, 2.5), [Vec(0.0, -1.0)])
    assert codec.decode_value(codec.encode_value(value)) == value
    with pytest.raises(ValueError, match="40000"):
        codec.register_type(Vec, 12, list, list)
    with pytest.raises(ValueError, match="already registered"):
        codec.register_type(dict, 40001, list, list)


def test_each_shipped_version_has_its_own_class_under_a_tag() -> None:
    # Two shipped versions of one plugin define their own Span and register it under one
    # tag (issue 46: the second was refused, "already registered"); a value of a run decodes
    # to its own version's class, a value outside any run to installed code's or the newest.
    def span_of(version: str) -> type:
        cls = type("Span", (), {"__init__": lambda self, lo: setattr(self, "lo", lo)})
        cls.__module__ = f"satind_shipped_{version}.spans"
        codec.register_type(cls, 40777, lambda s: s.lo, cls)
        return cls

    one, two = span_of("aaa"), span_of("bbb")
    try:
        data = codec.encode_value(one(3))
        assert codec.encode_value(two(3)) == data  # the same bytes on the wire
        assert type(codec.decode_value(data, version="satind_shipped_aaa")) is one
        assert type(codec.decode_value(data, version="satind_shipped_bbb")) is two
        assert type(codec.decode_value(data)) is two  # no version: the newest
        assert codec.version_of(one.__module__) == "satind_shipped_aaa"
        assert codec.version_of(__name__) == ""
        values_mod.forget_version("satind_shipped_bbb")  # unloaded: its class goes
        assert type(codec.decode_value(data, version="satind_shipped_bbb")) is one
        with pytest.raises(codec.EncodeError):
            codec.encode_value(two(3))
        other = type("Other", (), {})
        other.__module__ = one.__module__
        with pytest.raises(ValueError, match="already registered"):
            codec.register_type(other, 40777, list, list)  # still one class per version
    finally:
        values_mod.forget_version("satind_shipped_aaa")


def test_unknown_tag_and_garbage_values_are_decode_errors() -> None:
    with pytest.raises(codec.DecodeError, match="unknown CBOR tag"):
        codec.decode_value(cbor2.dumps(cbor2.CBORTag(45000, 1)))
    with pytest.raises(codec.DecodeError):
        codec.decode_value(b"\xff\x00")
    with pytest.raises(codec.DecodeError):
        codec.decode_value(b"\x81" * 500 + b"\x00")  # nesting deeper than the cap


# -- messages ------------------------------------------------------------------------------


def _strategy(hint: Any) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(hint)
    if hint is int:
        return st.integers(min_value=codec.INT_MIN, max_value=codec.INT_MAX)
    if hint is float:
        return st.floats(allow_nan=False, allow_infinity=False)
    if hint is str:
        return st.text(max_size=10)
    if hint is bytes:
        return st.binary(max_size=10)
    if hint is bool:
        return st.booleans()
    if hint is type(None):
        return st.none()
    if origin in (typing.Union, __import__("types").UnionType):
        return st.one_of(*[_strategy(a) for a in typing.get_args(hint)])
    if origin is list:
        return st.lists(_strategy(typing.get_args(hint)[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(st.text(max_size=5), _strategy(typing.get_args(hint)[1]), max_size=3)
    if dataclasses.is_dataclass(hint):
        return _record_strategy(hint)  # type: ignore[arg-type]
    raise TypeError(hint)


def _record_strategy(cls: type) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls, vars(m))
    fields = {f.name: _strategy(hints[f.name]) for f in dataclasses.fields(cls)}
    return st.builds(cls, **fields)


messages = st.one_of(*[_record_strategy(cls) for cls in m.MESSAGE_TYPES])


@settings(max_examples=300)
@given(messages)
def test_every_message_round_trips(msg: m.Message) -> None:
    assert codec.decode_message(codec.encode_message(msg)) == msg


def test_type_codes_are_unique_and_stable() -> None:
    codes = [cls.TYPE for cls in m.MESSAGE_TYPES]
    assert len(codes) == len(set(codes))
    # Part of the protocol: changing these breaks every deployed peer.
    assert (m.Hello.TYPE, m.StealRequest.TYPE, m.StealReply.TYPE, m.JobResult.TYPE) == (
        1,
        10,
        11,
        12,
    )


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (cbor2.dumps([1, 2]), "must be a map"),
        (cbor2.dumps({"req": 1}), "no integer type code"),
        (cbor2.dumps({"t": 9999}), "unknown message type"),
        (cbor2.dumps({"t": 10, "req": 1}), "missing field"),
        (cbor2.dumps({"t": 10, "req": "1", "wide": False}), "expected int"),
        (cbor2.dumps({"t": 10, "req": True, "wide": False}), "expected int"),
        (cbor2.dumps({"t": 10, "req": 1, "wide": False, "x": 1}), "unknown field"),
        (cbor2.dumps({"t": 11, "req": 1, "job": {"run_id": 5}}), "job.run_id: expected str"),
        (cbor2.dumps({"t": 23, "req": 1, "run_id": "r", "counters": {"a": "b"}}), "expected"),
        (b"\xa1\x61t\x0a\xff", "not valid CBOR"),
        (b"", "not valid CBOR"),
    ],
)
def test_malformed_messages_are_rejected(body: bytes, error: str) -> None:
    with pytest.raises(codec.DecodeError, match=error):
        codec.decode_message(body)


def test_duplicate_keys_are_rejected() -> None:
    # {"t": 10, "t": 11, ...} must not be accepted as whichever came last.
    body = b"\xa3\x61t\x0a\x61t\x0b\x63req\x01"
    with pytest.raises(codec.DecodeError):
        codec.decode_message(body)


@settings(max_examples=500)
@given(st.binary(max_size=200))
def test_random_bytes_never_crash_the_decoder(data: bytes) -> None:
    with contextlib.suppress(codec.DecodeError):
        codec.decode_message(data)


# -- framing -------------------------------------------------------------------------------


async def _read_frames(data: bytes, max_frame: int) -> list[bytes]:
    send, recv = trio.testing.memory_stream_pair()
    await send.send_all(data)
    await send.aclose()
    reader = FrameReader(recv, NetConfig(max_frame_bytes=max_frame))
    frames = []
    while (frame := await reader.read()) is not None:
        frames.append(frame)
    return frames


async def test_frames_split_anywhere_are_reassembled() -> None:
    bodies = [codec.encode_message(m.StealRequest(i, i % 2 == 0)) for i in range(5)]
    assert await _read_frames(b"".join(codec.frame(b) for b in bodies), 1024) == bodies


async def test_oversized_frame_is_refused_before_reading_it() -> None:
    with pytest.raises(codec.DecodeError, match="exceeds the cap"):
        await _read_frames(codec.FRAME_HEADER.pack(10_000) + b"x" * 10, 1000)


async def test_truncated_frame_is_an_error() -> None:
    with pytest.raises(codec.DecodeError, match="inside a frame"):
        await _read_frames(codec.FRAME_HEADER.pack(10) + b"abc", 1000)


async def test_a_large_frame_measures_the_bandwidth_from_its_sender(
    autojump_clock: trio.testing.MockClock,
) -> None:
    send, recv = trio.testing.memory_stream_pair()
    body = b"x" * 200_000
    reader = FrameReader(recv, NetConfig(max_frame_bytes=1 << 20))

    async def sender() -> None:
        await send.send_all(codec.frame(b"small"))
        await send.send_all(codec.FRAME_HEADER.pack(len(body)))
        for k in range(4):  # 50 kB every half second: 100 kB/s
            await trio.sleep(0.5)
            await send.send_all(body[k * 50_000 : (k + 1) * 50_000])

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        assert await reader.read() == b"small"
        assert reader.measured is None  # came in one read: says nothing
        assert await reader.read() == body
    assert reader.measured == (200_000, pytest.approx(2.0))


def test_float_fields_accept_integers() -> None:
    body = cbor2.dumps(
        {"t": 32, "run_id": "r", "value": None, "error": None, "elapsed_s": 3, "peers": 1}
    )
    msg = codec.decode_message(body)
    assert isinstance(msg, m.RunResult) and msg.elapsed_s == 3.0 and not math.isnan(msg.elapsed_s)


def test_every_message_type_has_a_decoder_and_an_encoder_built_from_its_hints() -> None:
    """They are built on first use, not at import: a field type the codec cannot check must
    still fail here, not on a peer at the first message of its kind."""
    for cls in m.MESSAGE_TYPES:
        entry = codec._decoder(cls.TYPE)
        assert entry is not None and entry[1] == cls.__name__
        assert callable(codec._encoder(cls))
    assert codec._decoder(max(c.TYPE for c in m.MESSAGE_TYPES) + 1) is None
    with pytest.raises(KeyError):
        codec._encoder(dict)
