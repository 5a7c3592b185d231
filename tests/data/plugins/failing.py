"""Test plugins: one that raises deep in its tree, one whose arguments cannot travel."""

from __future__ import annotations

import time

from satind import Plugin, spawnable, sync


@spawnable
def explode(depth: int, where: int) -> int:
    if depth == 0:
        time.sleep(0.01)  # let other peers steal before it fails
        if where == 0:
            raise ValueError("boom in a leaf")
        return 1
    handles = [explode.spawn(depth - 1, where - i) for i in range(3)]
    sync()
    return sum(h.result() for h in handles)


PLUGIN = Plugin(
    name="explode",
    entry=explode,
    usage="explode DEPTH WHERE",
    parse=lambda argv: (int(argv[0]), int(argv[1])),
    max_branching=3,
)


class Opaque:
    """Not CBOR-encodable: jobs carrying it cannot be stolen and must run where spawned."""

    def __init__(self, n: int) -> None:
        self.n = n


@spawnable
def local_only(box: Opaque, depth: int) -> int:
    if depth == 0:
        time.sleep(0.002)
        return box.n
    handles = [local_only.spawn(box, depth - 1) for _ in range(2)]
    sync()
    return sum(h.result() for h in handles)


@spawnable
def opaque_root(n: int, depth: int) -> int:
    return local_only(Opaque(n), depth)


PLUGIN_OPAQUE = Plugin(
    name="opaque",
    entry=opaque_root,
    usage="opaque N DEPTH",
    parse=lambda argv: (int(argv[0]), int(argv[1])),
    max_branching=2,
)
