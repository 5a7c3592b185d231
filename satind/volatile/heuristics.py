"""The on-line scheduling heuristics of scheduling-iterative-apps-volatile-resources §6: which
UP worker gets each of the tasks of an iteration not yet begun.

Every heuristic answers the same question (``plan``): given the UP workers (their speed
``w`` in slots per task, ``delay`` before they could start a new task, and their availability
chain) and the number of tasks to place, the worker of each task in assignment order. The
scheduler re-plans whenever a worker could start something, so only the first tasks of a plan
are ever started; the rest is re-decided later (the paper's *dynamic* strategy).

* RANDOM picks uniformly; RANDOM1-4 weight each worker by P_uu, P₊, π_u and 1 - π_d; their W
  variants divide the weight by ``w``.
* MCT places each task where it completes first (equation 1); EMCT ranks by the expected
  time of that workload under the chain (Theorem 2); LW by the probability P₊^CT of staying
  able to work that long; UD by P_UD(E(CT)). The starred variants (MCT*, ...) stretch the data
  time by ⌈n_active / n_com⌉ for the master's contention (equation 2).

``n_active`` is the paper's to the letter: the workers given one of the tasks placed so far
(the counter starts at zero, so the first task's transfer counts for nothing). With
``self_counts`` a worker not given one yet counts itself as well (the first task pays one
transfer): another reading, under which the starred heuristics gain nothing in the study
(docs/volatile.md). Where the paper is silent: ties go to the lower completion time, then the
lower worker id.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from satind.volatile.model import Chain

if TYPE_CHECKING:
    import random  # the type of the generator a caller hands over, seeded

RANDOM_WEIGHTS: dict[str, Callable[[Chain], float]] = {
    "random": lambda c: 1.0,
    "random1": lambda c: c.p[0][0],
    "random2": lambda c: c.p_plus(),
    "random3": lambda c: c.stationary()[0],
    "random4": lambda c: 1 - c.stationary()[2],
}
GREEDY = ("mct", "emct", "lw", "ud")
# Every heuristic by name, in Table 2's order of families.
NAMES: tuple[str, ...] = (
    *(f"{g}{star}" for g in ("emct", "mct", "ud", "lw") for star in ("*", "")),
    *(f"random{i}w" for i in range(1, 5)),
    "random",
    *(f"random{i}" for i in range(1, 5)),
)


def canonical(name: str) -> str:
    """A heuristic's name as given on a command line (``emct*``, ``EMCT-star``, ``emcts``).

    Raises:
        ValueError: no such heuristic.
    """
    key = name.strip().lower().replace("-star", "*").replace("_star", "*")
    if key.endswith("s") and key[:-1] in GREEDY:
        key = key[:-1] + "*"
    if key not in NAMES:
        raise ValueError(f"no heuristic {name!r}; choose one of {', '.join(NAMES)}")
    return key


class Candidate(NamedTuple):
    """An UP worker as a heuristic sees it (a tuple: schedulers make many)."""

    worker: int
    w: float  # slots of UP time per task
    delay: float  # slots before it could start a new task, if it stays UP (Delay(q))
    chain: Chain


def plan(
    name: str,
    candidates: Sequence[Candidate],
    tasks: int,
    t_data: float,
    n_com: int,
    rng: random.Random,
    self_counts: bool = False,
) -> list[int]:
    """The worker of each of ``tasks`` tasks, in assignment order (empty without
    candidates)."""
    return list(assignments(name, candidates, tasks, t_data, n_com, rng, self_counts))


def assignments(
    name: str,
    candidates: Sequence[Candidate],
    tasks: int,
    t_data: float,
    n_com: int,
    rng: random.Random,
    self_counts: bool = False,
) -> Iterator[int]:
    """``plan``, one task at a time: a scheduler that starts only the first few stops early.
    ``self_counts``: whether a worker not given a task yet counts itself in ``n_active``, as
    well as those given one (see the module)."""
    if not candidates or tasks <= 0:
        return iter(())
    if name.startswith("random"):
        return iter(_random(name, candidates, tasks, rng))
    return _greedy(name, candidates, tasks, t_data, n_com, self_counts)


@functools.lru_cache(maxsize=65536)
def _constants(chain: Chain) -> tuple[float, float, float, float]:
    """What the greedy criteria need of a chain: E(W)'s slope beyond W (Theorem 2: E(W) = W +
    (W - 1) * extra), -log P₊ (LW), and log P_UD(k) = first + (k - 2) * rate (UD)."""
    extra = chain.expected_time(2.0) - 2.0
    pp = chain.p_plus()
    lw_rate = -math.log(pp) if pp > 0 else math.inf
    first = chain.p_ud(2.0)
    per = chain.p_ud(3.0) / first if first > 0 else 0.0
    ud_first = math.log(first) if first > 0 else -math.inf
    ud_rate = math.log(per) if per > 0 else -math.inf
    return extra, lw_rate, ud_first, ud_rate


def _random(
    name: str, candidates: Sequence[Candidate], tasks: int, rng: random.Random
) -> list[int]:
    base = name[:-1] if name.endswith("w") else name
    weigh = RANDOM_WEIGHTS[base]
    weights = [max(weigh(c.chain), 0.0) / (c.w if name.endswith("w") else 1.0) for c in candidates]
    if sum(weights) <= 0:
        weights = [1.0] * len(candidates)
    picks = rng.choices(range(len(candidates)), weights=weights, k=tasks)
    return [candidates[i].worker for i in picks]


def _key(kind: str, ct: float, consts: tuple[float, float, float, float]) -> float:
    """The criterion a greedy heuristic minimises for a completion time ``ct``."""
    if kind == "mct":
        return ct
    extra, lw_rate, first, rate = consts
    if kind == "emct":
        return ct + max(ct - 1, 0) * extra
    if kind == "lw":  # maximise P₊^CT: minimise CT * -log P₊
        return ct * lw_rate if lw_rate > 0 else 0.0
    e = ct + max(ct - 1, 0) * extra  # ud: maximise log P_UD(E(CT))
    return -(first + ((e - 2) * rate if e > 2 else 0.0))


def _greedy(
    name: str,
    candidates: Sequence[Candidate],
    tasks: int,
    t_data: float,
    n_com: int,
    self_counts: bool,
) -> Iterator[int]:
    kind = name.rstrip("*")
    consts = [_constants(c.chain) for c in candidates]
    if not name.endswith("*"):
        # Without contention a worker's next CT grows with its own tasks only: a heap of each
        # worker's next (key, CT, id) gives the same choices as scanning them all.
        heap = []
        for i, c in enumerate(candidates):
            ct = c.delay + t_data + c.w
            heap.append((_key(kind, ct, consts[i]), ct, c.worker, i, 1))
        heapq.heapify(heap)
        for _ in range(tasks):
            _, _, worker, i, n = heapq.heappop(heap)
            yield worker
            c = candidates[i]
            ct = c.delay + t_data + n * max(t_data, c.w) + c.w
            heapq.heappush(heap, (_key(kind, ct, consts[i]), ct, worker, i, n + 1))
        return
    counts = [0] * len(candidates)
    active = 0
    for _ in range(tasks):
        best_i = -1
        best_key: tuple[float, float, int] | None = None
        for i, c in enumerate(candidates):
            n = counts[i]
            data = math.ceil((active + (self_counts and n == 0)) / n_com) * t_data
            ct = c.delay + data + n * (data if data > c.w else c.w) + c.w
            candidate_key = (_key(kind, ct, consts[i]), ct, c.worker)
            if best_key is None or candidate_key < best_key:
                best_i, best_key = i, candidate_key
        if counts[best_i] == 0:
            active += 1
        counts[best_i] += 1
        yield candidates[best_i].worker
