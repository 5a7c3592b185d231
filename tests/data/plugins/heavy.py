"""A test plugin with large arguments: parsing builds a table of 3-tuples, and every job
carries its slice of it. Encoding such arguments takes seconds (cbor2 calls back into Python
for every tuple), which is what a peer's network side must never spend while probes wait."""

from __future__ import annotations

from collections.abc import Sequence

from satind import Plugin, spawnable, sync

CHUNK = 20_000


@spawnable
def scan(rows: tuple[tuple[int, int, int], ...]) -> int:
    if len(rows) <= CHUNK:
        return sum(a * b - c for a, b, c in rows)
    mid = len(rows) // 2
    left = scan.spawn(rows[:mid])
    right = scan.spawn(rows[mid:])
    sync()
    return left.result() + right.result()


def parse(argv: Sequence[str]) -> tuple[tuple[tuple[int, int, int], ...]]:
    n = int(argv[0])
    return (tuple((i, i * 7 % 13, i % 5) for i in range(n)),)


def check(args: tuple[tuple[tuple[int, int, int], ...]], result: int) -> None:
    assert result == sum(a * b - c for a, b, c in args[0])


PLUGIN = Plugin(
    name="heavy",
    entry=scan,
    usage="heavy ROWS",
    parse=parse,
    max_branching=2,
    check=check,
)
