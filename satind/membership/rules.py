"""SWIM's and Lifeguard's decisions as pure functions (memberlist's suspicion.go and
awareness.go): how long a suspicion lasts, how health scales timeouts, how often full state
is exchanged. ``swim.py`` only sleeps, sends and applies them; the tests check them as case
tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


def suspicion_timeout(mult: int, members: int, interval: float) -> float:
    """The shortest suspicion: mult * max(1, log10(N)) * probe interval (memberlist)."""
    return mult * max(1.0, math.log10(max(1, members))) * interval


def remaining_suspicion_time(
    confirmations: int, expected: int, elapsed: float, low: float, high: float
) -> float:
    """Lifeguard: the suspicion timeout falls from ``high`` to ``low`` on a log scale as
    independent confirmations arrive (``expected`` of them bring it to ``low``)."""
    if expected < 1:
        return max(0.0, low - elapsed)
    fraction = math.log(confirmations + 1) / math.log(expected + 1)
    timeout = max(low, high - fraction * (high - low))
    return max(0.0, timeout - elapsed)


def scale_by_health(seconds: float, score: int) -> float:
    """Lifeguard: a peer in poor local health waits longer before blaming others."""
    return seconds * (score + 1)


def push_pull_interval(base: float, members: int) -> float:
    """Full state syncs are O(N) each: past 32 members, space them out by log2 (memberlist's
    pushPullScale), so that their total cost grows like N log N rather than N squared."""
    if members <= 32:
        return base
    return base * (math.ceil(math.log2(members) - math.log2(32)) + 1)


def health_delta(acked: bool, expected_nacks: int, nacks: int) -> int:
    """How a probe changes the local health score: success lowers it; a failure raises it,
    more so when the members asked to help did not even answer (our links are the problem)."""
    if acked:
        return -1
    return 1 + max(0, expected_nacks - nacks)


@dataclass
class Suspicion:
    """A member we suspect: since when, how long it may last, who confirmed it."""

    incarnation: int
    started: float
    low: float
    high: float
    expected: int
    confirmers: set[str] = field(default_factory=set)

    def deadline(self) -> float:
        left = remaining_suspicion_time(
            len(self.confirmers), self.expected, 0.0, self.low, self.high
        )
        return self.started + left
