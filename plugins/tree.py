"""tree DEPTH BRANCHING LEAF_MS [sleep|busy]: a synthetic tree with a known answer.

Every inner node spawns BRANCHING children down to DEPTH; a leaf sleeps (an emulated remote
processor: sleeping releases the GIL, so many peers fit on few cores) or spins for LEAF_MS of
its thread's CPU time (as computing does: on a loaded machine a leaf takes longer).
The result is the sum over all leaves of blake2b(bytes(path), digest_size=8) read as a
big-endian integer, mod 2**64, where path lists the child indices from the root: a lost leaf
or a leaf applied twice changes it. ``expected`` computes it without running anything.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Sequence

from satind import NotChecked, Plugin, UsageError, spawnable, sync

from ._args import int_arg

MASK = (1 << 64) - 1
# Leaves up to which the check sums the tree again (a few seconds of hashing).
CHECK_LEAVES = 2_000_000


def leaf_value(path: Sequence[int]) -> int:
    return int.from_bytes(hashlib.blake2b(bytes(path), digest_size=8).digest(), "big")


def work(ms: float, mode: str) -> None:
    if ms <= 0:
        return
    if mode == "sleep":
        time.sleep(ms / 1000)
        return
    # CPU time, not wall time: a leaf that spun for wall time would do less work the more
    # loaded the machine, which no real computation does (and a test that waits for a peer to
    # have computed for a while would wait past the end of the run).
    end = time.thread_time() + ms / 1000
    while time.thread_time() < end:
        pass


@spawnable
def node(path: tuple[int, ...], depth: int, branching: int, leaf_ms: float, mode: str) -> int:
    if depth == 0:
        work(leaf_ms, mode)
        return leaf_value(path)
    handles = [
        node.spawn((*path, i), depth - 1, branching, leaf_ms, mode) for i in range(branching)
    ]
    sync()
    return sum(h.result() for h in handles) & MASK


def expected(depth: int, branching: int) -> int:
    """The answer, from the definition."""
    total = 0
    for path in itertools.product(range(branching), repeat=depth):
        total += leaf_value(path)
    return total & MASK


def parse(argv: Sequence[str]) -> tuple[tuple[int, ...], int, int, float, str]:
    if len(argv) > 4:
        raise UsageError(f"too many arguments: {' '.join(argv[4:])}")
    depth = int_arg(argv, 0, "DEPTH", low=0, high=64)
    branching = int_arg(argv, 1, "BRANCHING", low=1, high=256)
    if branching**depth > 10**8:
        raise UsageError(f"{branching}**{depth} leaves is more than 10**8")
    if len(argv) < 3:
        raise UsageError("missing LEAF_MS")
    try:
        leaf_ms = float(argv[2])
    except ValueError:
        raise UsageError(f"LEAF_MS must be a number, got {argv[2]!r}") from None
    if not 0 <= leaf_ms <= 3_600_000:
        raise UsageError(f"LEAF_MS must be between 0 and 3600000, got {leaf_ms}")
    mode = argv[3] if len(argv) > 3 else "sleep"
    if mode not in ("sleep", "busy"):
        raise UsageError(f"mode must be 'sleep' or 'busy', got {mode!r}")
    return (), depth, branching, leaf_ms, mode


def check(args: tuple[object, ...], result: int) -> None:
    depth, branching = args[1], args[2]
    assert isinstance(depth, int) and isinstance(branching, int)
    if branching**depth > CHECK_LEAVES:
        raise NotChecked(
            f"{branching}**{depth} leaves: the check sums the leaves again up to {CHECK_LEAVES:,}"
        )
    want = expected(depth, branching)
    if result != want:
        raise AssertionError(f"tree sum is {want}, not {result}")


PLUGIN = Plugin(
    name="tree",
    entry=node,
    usage="tree DEPTH BRANCHING LEAF_MS [sleep|busy]",
    parse=parse,
    max_branching=lambda args: int(args[2]),
    check=check,
    description="synthetic tree with sleeping or spinning leaves and a known answer",
)
