"""Seeded randomness, and only that, for the protocol core's decisions.

The core imports no ``random`` (a contract in pyproject.toml): every choice it makes at random
is made with a generator seeded from something in its state — a run id, a peer name, a
generator the node seeded and handed over — so that a decision replays exactly, in a test and
in the simulator. This module is the only way the core gets one: ``seeded(seed)`` needs a
seed, and there is no module-level, unseeded generator to reach for.
"""

from __future__ import annotations

import random

# A generator the core may be handed (the steal loop's, the iterative scheduler's).
Rng = random.Random


def seeded(seed: int | str) -> random.Random:
    """A generator that gives the same choices for the same seed, on every peer."""
    return random.Random(seed)
