"""barneshut BODIES STEPS [SEED] [plain|shared]: an N-body simulation by Barnes-Hut, in the two
variants of satin-grid-programming-model §5.2.1 (Fig 1).

BODIES bodies in the plane (positions, velocities and masses from SEED) are moved STEPS
times. Each step builds a quadtree of the bodies (every cell knows its mass and centre of
mass), computes every body's acceleration by walking the tree (a cell far enough away,
size / distance < THETA, counts as one body), and moves the bodies (semi-implicit Euler).
The force computation is divide and conquer over ranges of bodies, down to LEAF bodies.

* ``plain``: the tree and the positions are arguments of every force job, so a stolen job
  carries the whole tree (the paper's version "that distributes all data as parameters").
* ``shared`` (default): the bodies are a shared object (``Bodies``, satind/shared.py); the
  root moves them with one global call per step, each peer builds the tree from its replica,
  and the force jobs carry only a reference and their range. A force job of step s is
  guarded by ``bodies.step == s``: on a thief it runs only on a replica of that step.

Result: ``{"checksum", "x_sum"}`` over the final positions. Every body's acceleration is
computed by the same operations wherever it runs, and the bodies move on the root, so the
result equals a sequential run's exactly; the check makes that run.
"""

from __future__ import annotations

import hashlib
import math
import random
import struct
from collections.abc import Sequence
from typing import Any

from satind import Plugin, SharedObject, UsageError, global_method, spawnable, sync

from ._args import at_most, int_arg

THETA = 0.5
LEAF = 32
DT = 0.01
SOFTENING = 1e-3

Tree = tuple[Any, ...]  # (cx, cy, mass, size, body index | children)
Flat = tuple[float, ...]  # x0, y0, x1, y1, ...


def initial(n: int, seed: int) -> tuple[Flat, Flat, Flat]:
    rng = random.Random(seed)
    pos: list[float] = []
    vel: list[float] = []
    for _ in range(n):
        r, a = math.sqrt(rng.random()), rng.random() * 2 * math.pi
        pos += [r * math.cos(a), r * math.sin(a)]
        vel += [-0.2 * math.sin(a) * r, 0.2 * math.cos(a) * r]
    masses = tuple(rng.uniform(0.5, 1.5) / n for _ in range(n))
    return tuple(pos), tuple(vel), masses


def build(pos: Flat, masses: Flat) -> Tree:
    """The quadtree of the bodies: nested tuples, a leaf per body."""
    n = len(masses)
    xs, ys = pos[0::2], pos[1::2]
    cx, cy = (min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2
    half = max(max(xs) - min(xs), max(ys) - min(ys)) / 2 + 1e-9
    return _cell(list(range(n)), pos, masses, cx, cy, half, 0)


def _cell(
    idx: list[int], pos: Flat, masses: Flat, cx: float, cy: float, half: float, depth: int
) -> Tree:
    if len(idx) == 1:
        i = idx[0]
        return (pos[2 * i], pos[2 * i + 1], masses[i], 0.0, i)
    kids: list[Tree] = []
    if depth > 40:
        # Bodies at (nearly) one point: a cell whose children are their leaves.
        kids = [(pos[2 * i], pos[2 * i + 1], masses[i], 0.0, i) for i in idx]
    else:
        quads: list[list[int]] = [[], [], [], []]
        for i in idx:
            quads[(pos[2 * i] >= cx) + 2 * (pos[2 * i + 1] >= cy)].append(i)
        q = half / 2
        for k, members in enumerate(quads):
            if members:
                kx = cx + (q if k & 1 else -q)
                ky = cy + (q if k & 2 else -q)
                kids.append(_cell(members, pos, masses, kx, ky, q, depth + 1))
    mass = sum(kid[2] for kid in kids)
    mx = sum(kid[0] * kid[2] for kid in kids) / mass
    my = sum(kid[1] * kid[2] for kid in kids) / mass
    return (mx, my, mass, 2 * half, tuple(kids))


def accel(i: int, x: float, y: float, tree: Tree) -> tuple[float, float]:
    """Body i's acceleration from the tree (iterative walk, children in a fixed order)."""
    ax = ay = 0.0
    stack = [tree]
    while stack:
        cx, cy, mass, size, inside = stack.pop()
        if size == 0.0 and inside == i:
            continue
        dx, dy = cx - x, cy - y
        d2 = dx * dx + dy * dy + SOFTENING
        if size == 0.0 or size * size < THETA * THETA * d2:
            f = mass / (d2 * math.sqrt(d2))
            ax += f * dx
            ay += f * dy
        else:
            stack.extend(inside)
    return ax, ay


def accel_range(lo: int, hi: int, pos: Flat, tree: Tree) -> list[float]:
    out: list[float] = []
    for i in range(lo, hi):
        out.extend(accel(i, pos[2 * i], pos[2 * i + 1], tree))
    return out


@spawnable
def forces_plain(tree: Tree, pos: Flat, lo: int, hi: int) -> list[float]:
    """Accelerations of bodies lo..hi, the tree and positions passed as arguments."""
    if hi - lo <= LEAF:
        return accel_range(lo, hi, pos, tree)
    mid = (lo + hi) // 2
    a, b = forces_plain.spawn(tree, pos, lo, mid), forces_plain.spawn(tree, pos, mid, hi)
    sync()
    return list(a.result()) + list(b.result())


class Bodies(SharedObject):
    """The bodies' positions and masses, replicated; the root moves them once per step."""

    def __init__(self, pos: Flat, masses: Flat) -> None:
        self.step = 0
        self.pos = list(pos)
        self.masses = list(masses)
        self._tree: tuple[int, Tree] | None = None

    @global_method
    def advance(self, step: int, pos: list[float]) -> None:
        if step > self.step:
            self.step, self.pos = step, list(pos)

    def tree(self) -> Tree:
        """This replica's quadtree of the current step (built once per step per peer)."""
        cached = getattr(self, "_tree", None)
        if cached is None or cached[0] != self.step:
            self._tree = (self.step, build(tuple(self.pos), tuple(self.masses)))
            cached = self._tree
        return cached[1]


@spawnable
def forces_shared(bodies: Bodies, lo: int, hi: int, step: int) -> list[float]:
    """Accelerations of bodies lo..hi of step ``step``, from this peer's replica."""
    if hi - lo <= LEAF:
        return accel_range(lo, hi, tuple(bodies.pos), bodies.tree())
    mid = (lo + hi) // 2
    a = forces_shared.spawn(bodies, lo, mid, step)
    b = forces_shared.spawn(bodies, mid, hi, step)
    sync()
    return list(a.result()) + list(b.result())


@forces_shared.guard
def _step_is_current(bodies: Bodies, lo: int, hi: int, step: int) -> bool:
    return bodies.step == step


def move(pos: Flat, vel: Flat, acc: Sequence[float]) -> tuple[Flat, Flat]:
    new_vel = tuple(v + a * DT for v, a in zip(vel, acc, strict=True))
    new_pos = tuple(p + v * DT for p, v in zip(pos, new_vel, strict=True))
    return new_pos, new_vel


@spawnable
def simulate(n: int, steps: int, seed: int, variant: str) -> dict[str, Any]:
    """The run's root: move the bodies ``steps`` times."""
    pos, vel, masses = initial(n, seed)
    bodies = Bodies(pos, masses) if variant == "shared" else None
    for step in range(steps):
        if bodies is not None:
            acc = forces_shared(bodies, 0, n, step)  # a plain call: its spawns are this job's
        else:
            acc = forces_plain(build(pos, masses), pos, 0, n)
        pos, vel = move(pos, vel, acc)
        if bodies is not None:
            bodies.advance(step + 1, list(pos))
    return summary(pos)


def summary(pos: Flat) -> dict[str, Any]:
    digest = hashlib.sha256(struct.pack(f"<{len(pos)}d", *pos)).hexdigest()
    return {"checksum": digest[:16], "x_sum": sum(pos[0::2])}


def parse(argv: Sequence[str]) -> tuple[int, int, int, str]:
    at_most(argv, 4)
    n = int_arg(argv, 0, "BODIES", low=2, high=200_000)
    steps = int_arg(argv, 1, "STEPS", low=1, high=10_000)
    seed = int_arg(argv, 2, "SEED", low=0, high=2**63, default=1)
    variant = argv[3] if len(argv) > 3 else "shared"
    if variant not in ("plain", "shared"):
        raise UsageError(f"the variant is 'plain' or 'shared', not {variant!r}")
    return n, steps, seed, variant


def check(args: tuple[Any, ...], result: dict[str, Any]) -> None:
    n, steps, seed, _ = args
    pos, vel, masses = initial(n, seed)
    for _ in range(steps):  # sequentially, without any spawn
        tree = build(pos, masses)
        pos, vel = move(pos, vel, accel_range(0, n, pos, tree))
    expected = summary(pos)
    if result != expected:
        raise AssertionError(f"final positions {result} differ from a sequential run's {expected}")


def benchmark() -> None:
    """Forces on a small system (256 bodies: ~3 ms), for self-adaptivity's speed."""
    pos, _, masses = initial(256, 1)
    accel_range(0, 256, pos, build(pos, masses))


PLUGIN = Plugin(
    name="barneshut",
    entry=simulate,
    usage="barneshut BODIES STEPS [SEED] [plain|shared]",
    parse=parse,
    max_branching=2,
    check=check,
    description="Barnes-Hut N-body steps; the bodies as a shared object or passed as arguments",
    benchmark=benchmark,
)
