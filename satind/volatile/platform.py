"""The world of the study of scheduling-iterative-apps-volatile-resources §7: a scenario's
parameters (``Params``, with the simulator's choices where the paper is silent), a platform's
workers (their Markov chains and speeds, drawn as §7 says), and their availability traces.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from satind.volatile.model import DOWN, RECLAIMED, UP, Chain


@dataclass(frozen=True)
class Params:
    """One scenario of the study (§7) and the simulator's choices."""

    p: int = 20
    m: int = 10
    n_com: int = 10
    w_min: int = 1
    iterations: int = 10
    replicas: int = 2  # extra copies of a task at most
    initial: str = "up"  # "up" or "stationary": the workers' states at slot 0
    chains: str = "true"  # "true" or "estimated": what the heuristics know
    # The starred heuristics' n_active. "paper": the paper's letter (the workers given a task
    # so far); "self": a worker not given one yet counts itself too. volatile/heuristics.py.
    n_active: str = "paper"
    max_slots: int = 2_000_000  # a run that has not finished by then counts as failed

    @property
    def t_data(self) -> int:
        return self.w_min

    @property
    def t_prog(self) -> int:
        return 5 * self.w_min


@dataclass(frozen=True)
class Platform:
    """The workers of one experimental scenario: their chains and speeds."""

    chains: tuple[Chain, ...]
    w: tuple[int, ...]

    @staticmethod
    def draw(params: Params, rng: random.Random) -> Platform:
        """§7: P_xx ~ U[0.90, 0.99] for each state x, P_xy = (1 - P_xx) / 2, and w_q ~
        U[w_min, 10 w_min] (integer slots)."""
        chains = tuple(
            Chain.symmetric(
                (rng.uniform(0.9, 0.99), rng.uniform(0.9, 0.99), rng.uniform(0.9, 0.99))
            )
            for _ in range(params.p)
        )
        w = tuple(rng.randint(params.w_min, 10 * params.w_min) for _ in range(params.p))
        return Platform(chains, w)


class Traces:
    """Each worker's state at every slot, drawn lazily from its chain and kept, so that every
    heuristic run on an instance meets the same availability."""

    def __init__(self, platform: Platform, seed: int, initial: str) -> None:
        self.chains = platform.chains
        self.rngs = [random.Random(f"{seed}:{q}") for q in range(len(self.chains))]
        first = []
        for q, chain in enumerate(self.chains):
            if initial == "stationary":
                pi = chain.stationary()
                x = self.rngs[q].random()
                first.append(UP if x < pi[0] else RECLAIMED if x < pi[0] + pi[1] else DOWN)
            else:
                first.append(UP)
        self.states: list[list[int]] = [[s] for s in first]
        self.slots: list[tuple[int, ...]] = []

    def at(self, t: int) -> tuple[int, ...]:
        """Every worker's state at slot ``t``."""
        slots = self.slots
        while len(slots) <= t:
            n = len(slots)
            for q, states in enumerate(self.states):
                while len(states) <= n:
                    states.append(self.chains[q].step(states[-1], self.rngs[q]))
            slots.append(tuple(states[n] for states in self.states))
        return slots[t]
