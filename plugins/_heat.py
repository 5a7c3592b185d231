"""Heat diffusion on a 2-D plate by Jacobi iteration (mpi-ios-reconfigurable-iterative-apps'
application), the numerical core of the `heat2d` plugin of issue 17: the plate, one sweep of
the whole plate, the same sweep over a block of rows given its neighbours' edge rows (the
ghost rows an entity receives each iteration), and a PNG of the plate.

The top edge is held at 100 degrees and the other edges at 0 (Dirichlet boundaries); every
interior cell becomes the mean of its four neighbours, added in one fixed order, so a plate
swept block by block with ghost rows is bit for bit the plate swept whole — whatever the blocks
and wherever they run.
"""

from __future__ import annotations

import struct
import zlib

Plate = list[list[float]]
HOT = 100.0


def plate(rows: int, cols: int) -> Plate:
    """The plate before the first iteration: the top row hot, everything else cold."""
    out = [[0.0] * cols for _ in range(rows)]
    out[0] = [HOT] * cols
    return out


def sweep_rows(rows: Plate, above: list[float] | None, below: list[float] | None) -> Plate:
    """One Jacobi sweep of a block of consecutive rows. ``above``/``below``: the row just
    outside the block (a neighbour's edge row), or None at the plate's top/bottom edge, whose
    row is a boundary and stays as it is."""
    n = len(rows)
    out = []
    for i in range(n):
        row = rows[i]
        up = rows[i - 1] if i > 0 else above
        down = rows[i + 1] if i < n - 1 else below
        if up is None or down is None:
            out.append(list(row))  # a boundary row of the plate
            continue
        if len(row) < 3:
            out.append(list(row))  # no interior cell
            continue
        # Cell j from up[j] + down[j] + row[j-1] + row[j+1], added in that order.
        inner = [
            (u + d + left + right) / 4
            for u, d, left, right in zip(up[1:-1], down[1:-1], row[:-2], row[2:], strict=True)
        ]
        out.append([row[0], *inner, row[-1]])
    return out


def sweep(whole: Plate) -> Plate:
    """One Jacobi sweep of the whole plate."""
    return sweep_rows(whole, None, None)


def blocks(rows: int, entities: int) -> list[tuple[int, int]]:
    """Row ranges [start, stop) of ``entities`` blocks as even as can be."""
    return [(e * rows // entities, (e + 1) * rows // entities) for e in range(entities)]


def sequential(rows: int, cols: int, iterations: int) -> Plate:
    """The reference: the whole plate swept ``iterations`` times."""
    p = plate(rows, cols)
    for _ in range(iterations):
        p = sweep(p)
    return p


def png(p: Plate) -> bytes:
    """The plate as an RGB PNG, cold blue to hot red (zlib and struct only)."""
    height, width = len(p), len(p[0]) if p else 0
    raw = bytearray()
    for row in p:
        raw.append(0)  # filter type 0 for each scanline
        for t in row:
            x = min(max(t / HOT, 0.0), 1.0)
            raw += bytes((int(255 * x), int(255 * (1 - abs(2 * x - 1))), int(255 * (1 - x))))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(bytes(raw), 6))
        + chunk(b"IEND", b"")
    )
