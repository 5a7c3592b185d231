"""Synthetic divide-and-conquer trees for the simulator, with a known answer.

The answer is the ``tree`` plugin's: the sum over all leaves of blake2b(bytes(path),
digest_size=8) as a big-endian integer, mod 2**64, where path lists the child indices from the
root. A lost leaf or a leaf applied twice changes it.

The shape and the costs come from the workload parameters and from hashes of the paths, never
from an RNG that the schedule could disturb: the same workload has the same tree and the same
leaf costs under any schedule, seed or fault.

* ``branching``, ``depth``: a full tree, unless ``imbalance`` > 0: then every child but the first
  of a node is cut one level short with that probability (decided by the path's hash), which
  makes subtrees of very different sizes — the load-balancing case.
* ``leaf_ms``: the mean cost of a leaf in virtual milliseconds; ``dist`` is "fixed", "uniform"
  (0 to 2x the mean) or "exp" (exponential with that mean).
* ``needles`` > 0 makes the tree a *search* (the shape of satin-grid-programming-model Fig 2):
  a leaf is a needle with that probability (decided by its path's hash) and raises
  ``Found(path)``; every node spawns its children with an inlet that, at the first ``Found``,
  aborts the other children and passes it up. The answer is the path of *a* needle (which
  one depends on the schedule: every needle is right), or None when the tree has none.
* ``steps`` > 0 makes it iterative, the shape of the Satin paper's Barnes-Hut (Fig 1): the root
  makes a shared ``Clock`` and runs the tree ``steps`` times, advancing the clock with a
  global call after each; every job of step s is guarded by ``clock.step == s``, and a leaf
  that runs on a replica at another step (one its guard should have kept it from, or one
  changed under its job) returns a value of that step, as Barnes-Hut's forces would be of
  other positions: wrong, without an error, so that a run whose answer uses it is wrong (a
  raise would hide it where the failed job is dropped, as in an old epoch). The answer is
  the tree's times ``steps`` (mod 2**64). ``tail_ms``: the root then works that long before
  it answers (a run's last phase without global calls: the time in which anti-entropy must
  bring every replica to the last step; tests/sim/test_shared_sim.py).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

from satind import (
    Plugin,
    SharedObject,
    UsageError,
    abort,
    global_method,
    register_type,
    spawnable,
    sync,
)
from satind.sim.lockstep import spend

MASK = (1 << 64) - 1
DISTRIBUTIONS = ("fixed", "uniform", "exp")


@dataclass(frozen=True)
class Workload:
    depth: int
    branching: int
    leaf_ms: float
    dist: str = "fixed"
    imbalance: float = 0.0
    needles: float = 0.0
    steps: int = 0
    tail_ms: float = 0.0

    def spec(self) -> tuple[int, float, str, float, float, int, float]:
        """What every job carries (CBOR-friendly)."""
        return (
            self.branching,
            self.leaf_ms,
            self.dist,
            self.imbalance,
            self.needles,
            self.steps,
            self.tail_ms,
        )


class Clock(SharedObject):
    """The step an iterative workload is at, replicated on every peer."""

    def __init__(self) -> None:
        self.step = 0

    @global_method
    def advance(self, step: int) -> None:
        self.step = max(self.step, step)


# What a leaf's value is off by for each step its replica is away from its own.
STALE = 1_000_003


class Found(Exception):
    """A needle, found: raised by its leaf, handled by its parent's inlet."""

    def __init__(self, path: Sequence[int]) -> None:
        super().__init__(f"needle at {list(path)}")
        self.path = tuple(path)


register_type(Found, 40100, lambda e: list(e.path), Found)


def is_needle(path: Sequence[int], needles: float) -> bool:
    return needles > 0 and _unit(path, b"satind-needle") < needles


def _unit(path: Sequence[int], salt: bytes) -> float:
    """A number in [0, 1) fixed by the path (and a salt naming its use)."""
    digest = hashlib.blake2b(bytes(path), digest_size=8, person=salt).digest()
    return int.from_bytes(digest, "big") / 2**64


def leaf_value(path: Sequence[int]) -> int:
    return int.from_bytes(hashlib.blake2b(bytes(path), digest_size=8).digest(), "big")


def child_depth(path: Sequence[int], index: int, depth: int, imbalance: float) -> int:
    """Remaining depth of child ``index`` of the node at ``path`` (which has ``depth`` left)."""
    if index == 0 or imbalance <= 0:
        return depth - 1
    return depth - 2 if _unit((*path, index), b"satind-shape") < imbalance else depth - 1


def leaf_cost_s(path: Sequence[int], leaf_ms: float, dist: str) -> float:
    """The virtual seconds a leaf takes."""
    mean = leaf_ms / 1000
    if dist == "fixed":
        return mean
    u = _unit(path, b"satind-cost")
    if dist == "uniform":
        return 2 * mean * u
    return -mean * math.log(1 - u)  # exponential


def children(
    path: Sequence[int], depth: int, spec: Sequence[object]
) -> list[tuple[tuple[int, ...], int]]:
    """(path, remaining depth) of each child of a node; empty for a leaf."""
    branching, _, _, imbalance = spec[:4]
    assert isinstance(branching, int) and isinstance(imbalance, float | int)
    if depth <= 0:
        return []
    return [
        ((*path, i), max(0, child_depth(path, i, depth, float(imbalance))))
        for i in range(branching)
    ]


Spec = tuple[int, float, str, float, float, int, float]


@spawnable
def synthetic(path: tuple[int, ...], depth: int, spec: Spec) -> int | list[int] | None:
    """A node of the tree. In the simulator a leaf spends its cost in virtual time
    (``lockstep.spend``); run anywhere else, it costs nothing."""
    kids = children(path, depth, spec)
    needles = float(spec[4]) if len(spec) > 4 else 0.0
    steps = int(spec[5]) if len(spec) > 5 else 0
    if steps > 0 and not path:
        return _iterate(depth, spec, steps)
    if not kids:
        _, leaf_ms, dist = spec[:3]
        spend(leaf_cost_s(path, float(leaf_ms), str(dist)), tuple(path))
        if is_needle(path, needles):
            raise Found(path)
        return None if needles > 0 else leaf_value(path)
    if needles > 0:
        return _search(path, kids, spec)
    handles = [synthetic.spawn(p, d, spec) for p, d in kids]
    sync()
    return sum(h.result() for h in handles) & MASK  # type: ignore[misc]


def _search(
    path: tuple[int, ...], kids: list[tuple[tuple[int, ...], int]], spec: Spec
) -> list[int] | None:
    """An inner node of a search: the first needle below aborts the rest and goes up."""
    found: list[Found] = []

    def inlet(exc: Exception) -> None:
        if not isinstance(exc, Found):
            raise exc
        if not found:
            found.append(exc)
            abort()

    for p, d in kids:
        synthetic.spawn_inlet(inlet, p, d, spec)
    sync()
    if not found:
        return None
    if path:
        raise found[0]
    return list(found[0].path)  # the root answers with the path


def _iterate(depth: int, spec: Spec, steps: int) -> int:
    """The root of an iterative workload: the tree once per step, guarded by a shared clock."""
    clock = Clock()  # made in the root job: the same id if the root runs again
    total = 0
    for step in range(steps):
        total += int(stepped((), depth, spec, clock, step))
        clock.advance(step + 1)
    tail_ms = float(spec[6]) if len(spec) > 6 else 0.0
    spend(tail_ms / 1000, None)
    return total & MASK


@spawnable
def stepped(path: tuple[int, ...], depth: int, spec: Spec, clock: Clock, step: int) -> int:
    """A node of step ``step``: it may run only on a replica of the clock at that step."""
    kids = children(path, depth, spec)
    if not kids:
        _, leaf_ms, dist = spec[:3]
        spend(leaf_cost_s(path, float(leaf_ms), str(dist)), tuple(path))
        return (leaf_value(path) + STALE * (clock.step - step)) & MASK
    handles = [stepped.spawn(p, d, spec, clock, step) for p, d in kids]
    sync()
    return sum(h.result() for h in handles) & MASK


@stepped.guard
def _current(path: tuple[int, ...], depth: int, spec: Spec, clock: Clock, step: int) -> bool:
    return clock.step == step


def needles_in(workload: Workload) -> set[tuple[int, ...]]:
    """The needles of a search workload's tree."""
    out: set[tuple[int, ...]] = set()
    stack: list[tuple[tuple[int, ...], int]] = [((), workload.depth)]
    spec = workload.spec()
    while stack:
        path, depth = stack.pop()
        kids = children(path, depth, spec)
        if kids:
            stack.extend(kids)
        elif is_needle(path, workload.needles):
            out.add(path)
    return out


def expected(workload: Workload) -> tuple[int, int, float]:
    """(answer, number of leaves, total leaf seconds) of a workload, by walking its tree."""
    answer, leaves, work, _ = walk(workload)
    return answer, leaves, work


def walk(workload: Workload) -> tuple[int, int, float, int]:
    """(answer, leaves, total leaf seconds, spawns) of a workload's tree."""
    total = leaves = spawns = 0
    work = 0.0
    stack: list[tuple[tuple[int, ...], int]] = [((), workload.depth)]
    spec = workload.spec()
    while stack:
        path, depth = stack.pop()
        kids = children(path, depth, spec)
        if kids:
            stack.extend(kids)
            spawns += len(kids)
        else:
            total += leaf_value(path)
            leaves += 1
            work += leaf_cost_s(path, workload.leaf_ms, workload.dist)
    return total & MASK, leaves, work, spawns


def parse(argv: Sequence[str]) -> tuple[tuple[int, ...], int, Spec]:
    if len(argv) not in (5, 6, 7, 8):
        raise UsageError("give DEPTH BRANCHING LEAF_MS DIST IMBALANCE [NEEDLES [STEPS [TAIL_MS]]]")
    depth, branching, leaf_ms = int(argv[0]), int(argv[1]), float(argv[2])
    dist, imbalance = argv[3], float(argv[4])
    needles = float(argv[5]) if len(argv) >= 6 else 0.0
    steps = int(argv[6]) if len(argv) >= 7 else 0
    tail_ms = float(argv[7]) if len(argv) == 8 else 0.0
    if not 0 <= tail_ms <= 3_600_000:
        raise UsageError("TAIL_MS must be between 0 and 3600000")
    if not 0 <= steps <= 1000:
        raise UsageError("STEPS must be between 0 and 1000")
    if not 0 <= needles < 1:
        raise UsageError("NEEDLES is a probability: 0 <= NEEDLES < 1")
    if dist not in DISTRIBUTIONS:
        raise UsageError(f"DIST must be one of {', '.join(DISTRIBUTIONS)}")
    if not (0 <= depth <= 40 and 1 <= branching <= 255 and leaf_ms >= 0 and 0 <= imbalance < 1):
        raise UsageError(
            "out of range: 0 <= DEPTH <= 40, 1 <= BRANCHING <= 255, LEAF_MS >= 0, "
            "0 <= IMBALANCE < 1"
        )
    return (), depth, (branching, leaf_ms, dist, imbalance, needles, steps, tail_ms)


PLUGIN = Plugin(
    name="simtree",
    entry=synthetic,
    usage="simtree DEPTH BRANCHING LEAF_MS DIST IMBALANCE [NEEDLES [STEPS [TAIL_MS]]]",
    parse=parse,
    max_branching=lambda args: int(args[2][0]),
    description="the simulator's synthetic tree (runs in virtual time there)",
)
