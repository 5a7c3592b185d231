"""The numerical core of heat2d (plugins/_heat.py): a plate swept block by block with ghost
rows is bit for bit the plate swept whole, for any blocks; heat flows down from the hot edge;
the PNG is a valid image of the plate."""

from __future__ import annotations

import struct
import zlib

import pytest
from satind_plugins._heat import HOT, blocks, plate, png, sequential, sweep_rows


def _by_blocks(rows: int, cols: int, iterations: int, entities: int) -> list[list[float]]:
    """As entities would: each block swept with its neighbours' edge rows of the last
    iteration (the ghost rows exchanged at each barrier)."""
    p = plate(rows, cols)
    parts = [p[a:b] for a, b in blocks(rows, entities)]
    for _ in range(iterations):
        ghosts = [
            (parts[e - 1][-1] if e > 0 else None, parts[e + 1][0] if e < entities - 1 else None)
            for e in range(entities)
        ]
        parts = [sweep_rows(part, *ghosts[e]) for e, part in enumerate(parts)]
    return [row for part in parts for row in part]


@pytest.mark.parametrize("entities", [1, 2, 3, 8, 17])
def test_blocks_with_ghost_rows_are_bit_for_bit_the_whole_sweep(entities: int) -> None:
    assert _by_blocks(17, 9, 25, entities) == sequential(17, 9, 25)


def test_heat_flows_down_from_the_hot_edge_and_the_edges_hold() -> None:
    p = sequential(12, 8, 200)
    assert p[0] == [HOT] * 8 and p[-1] == [0.0] * 8
    assert all(row[0] == row[-1] == (HOT if i == 0 else 0.0) for i, row in enumerate(p))
    middle = [p[i][4] for i in range(1, 11)]
    assert middle == sorted(middle, reverse=True) and 0 < middle[-1] < middle[0] < HOT


def test_blocks_cover_the_rows_once() -> None:
    assert blocks(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert blocks(4, 4) == [(0, 1), (1, 2), (2, 3), (3, 4)]


def test_the_png_is_a_valid_image_of_the_plate() -> None:
    data = png(sequential(6, 5, 10))
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    width, height = struct.unpack(">II", data[16:24])
    assert (kind, length, width, height) == (b"IHDR", 13, 5, 6)
    idat = data.index(b"IDAT")
    (size,) = struct.unpack(">I", data[idat - 4 : idat])
    pixels = zlib.decompress(data[idat + 4 : idat + 4 + size])
    assert len(pixels) == 6 * (1 + 3 * 5)
    assert pixels[1:4] == bytes((255, 0, 0))  # the hot top-left corner is red
