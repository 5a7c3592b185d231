"""heat2d ROWS COLS ITERATIONS [ENTITIES] [--png FILE]: heat diffusion on a 2-D plate by Jacobi
iteration, an SPMD application (satind/spmd.py; mpi-ios-reconfigurable-iterative-apps §6).

The plate is cut into ENTITIES blocks of consecutive rows (8 by default). Each block is an
entity: its rows are its registered state, and each iteration it sweeps them once, reading the
edge rows of the blocks above and below (its ghosts, sent by their holders). satind may move
blocks between members at iteration boundaries; the answer is the same bit for bit, which the
check verifies against a sequential sweep of the whole plate (plugins/_heat.py). The result
is the final plate; the report gives its mean temperature and a checksum, and with ``--png``
(after ``--`` on the command line) makes a picture of it (``satind.output_file``: written
where the submitter is).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from typing import Any

from satind import UsageError, output_file, spmd_plugin

from . import _heat
from ._args import at_most, int_arg

Args = tuple[int, int, int, int]  # rows, cols, iterations, entities


def parse(argv: Sequence[str]) -> Args:
    plain = _without_png(argv)[0]
    at_most(plain, 4)
    rows = int_arg(plain, 0, "ROWS", low=3, high=100_000)
    cols = int_arg(plain, 1, "COLS", low=3, high=100_000)
    iterations = int_arg(plain, 2, "ITERATIONS", low=0, high=10_000_000)
    entities = int_arg(plain, 3, "ENTITIES", low=1, high=4096, default=8)
    if entities > rows:
        raise UsageError(f"ENTITIES ({entities}) must be at most ROWS ({rows}): a block per row")
    return rows, cols, iterations, entities


def _without_png(argv: Sequence[str]) -> tuple[list[str], str | None]:
    """The arguments without ``--png FILE`` (or ``--png=FILE``), and the file."""
    out: list[str] = []
    path: str | None = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--png":
            if i + 1 >= len(argv):
                raise UsageError("--png needs a FILE")
            path, i = argv[i + 1], i + 2
            continue
        if a.startswith("--png="):
            path = a.split("=", 1)[1]
        elif a != "--":
            out.append(a)
        i += 1
    return out, path


def entities(args: Args) -> int:
    return args[3]


def neighbours(args: Args, e: int) -> list[int]:
    return [n for n in (e - 1, e + 1) if 0 <= n < args[3]]


def iterations(args: Args) -> int:
    return args[2]


def initial(args: Args, e: int) -> _heat.Plate:
    rows, cols, _, count = args
    start, stop = _heat.blocks(rows, count)[e]
    return _heat.plate(rows, cols)[start:stop]


def ghost(args: Args, e: int, state: _heat.Plate, n: int) -> list[float]:
    """A block's edge row its neighbour ``n`` reads: the first row for the block above."""
    return state[0] if n < e else state[-1]


def step(args: Args, e: int, state: _heat.Plate, ghosts: dict[int, Any], it: int) -> _heat.Plate:
    return _heat.sweep_rows(state, ghosts.get(e - 1), ghosts.get(e + 1))


def gather(args: Args, states: list[_heat.Plate]) -> _heat.Plate:
    return [row for block in states for row in block]


def check(args: Args, result: _heat.Plate) -> None:
    expected = _heat.sequential(args[0], args[1], args[2])
    if result != expected:
        bad = next(i for i, (a, b) in enumerate(zip(result, expected, strict=False)) if a != b)
        raise AssertionError(f"row {bad} differs from a sequential sweep of the whole plate")


def checksum(p: _heat.Plate) -> str:
    """A digest of the plate's exact bits (two runs agree on it only if bit for bit equal)."""
    h = hashlib.sha256()
    for row in p:
        h.update(struct.pack(f"<{len(row)}d", *row))
    return h.hexdigest()[:16]


def report(argv: Sequence[str], result: _heat.Plate) -> dict[str, Any]:
    _, path = _without_png(argv)
    cells = sum(len(r) for r in result)
    out: dict[str, Any] = {
        "mean": round(sum(sum(r) for r in result) / cells, 6) if cells else 0.0,
        "checksum": checksum(result),
    }
    if path:
        output_file(path, _heat.png(result))  # written where the submitter is
        out["png"] = path
    return out


PLUGIN = spmd_plugin(
    "heat2d",
    usage="heat2d ROWS COLS ITERATIONS [ENTITIES] [-- --png FILE]",
    parse=parse,
    entities=entities,
    neighbours=neighbours,
    iterations=iterations,
    initial=initial,
    ghost=ghost,
    step=step,
    gather=gather,
    check=check,
    report=report,
    description="Jacobi heat diffusion on a plate, in row blocks that migrate (SPMD, IOS)",
)
