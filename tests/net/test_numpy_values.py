"""NumPy arrays as job arguments and results (net/values.py), when NumPy is installed: the
same array on the other side, a read-only view of the message's bytes; scalars as numbers;
object arrays refused, saying why. Skipped where NumPy is not installed (it is not one of
satind's dependencies)."""

from __future__ import annotations

import pytest

from satind.net.errors import DecodeError, EncodeError
from satind.net.values import NDARRAY_TAG, decode_value, encode_value

np = pytest.importorskip("numpy")


def test_an_array_travels_as_itself() -> None:
    for array in (
        np.arange(12, dtype=np.int32).reshape(3, 4),
        np.linspace(0.0, 1.0, 7),
        np.array([[1 + 2j]], dtype=np.complex64),
        np.zeros((0, 3)),
        np.asfortranarray(np.arange(6.0).reshape(2, 3)),  # not C-contiguous
    ):
        got = decode_value(encode_value((array, "and more")))
        assert got[1] == "and more"
        assert got[0].dtype == array.dtype and got[0].shape == array.shape
        assert np.array_equal(got[0], array)
        assert not got[0].flags.writeable  # a view of the message, not a copy


def test_numpy_scalars_travel_as_numbers() -> None:
    assert decode_value(encode_value([np.int64(7), np.float32(0.5)])) == [7, 0.5]


def test_what_cannot_travel_is_refused_saying_why() -> None:
    with pytest.raises(EncodeError, match="Python objects"):
        encode_value(np.array([object()], dtype=object))
    import cbor2

    bad = cbor2.dumps(cbor2.CBORTag(NDARRAY_TAG, ["<i4", [5], b"\0" * 3]))
    with pytest.raises(DecodeError, match="bad NumPy array"):
        decode_value(bad)
    hostile = cbor2.dumps(cbor2.CBORTag(NDARRAY_TAG, ["|O", [1], b"\0" * 8]))
    with pytest.raises(DecodeError, match="bad NumPy array"):
        decode_value(hostile)
