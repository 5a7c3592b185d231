"""The supervisor's restart back-off (ops/daemon.py): doubling for a peer that dies as it
starts, the first delay again for one that had been working (killed now and then)."""

from __future__ import annotations

import pytest

from satind.config import DaemonConfig
from satind.ops.daemon import restart_backoff

CFG = DaemonConfig()  # restart_delay_s 1, restart_max_delay_s 60, restart_stable_s 5


@pytest.mark.parametrize(
    ("crashes", "ran_s", "expected"),
    [
        (0, 0.5, (1, 1.0)),  # the first crash
        (1, 0.5, (2, 2.0)),  # dies again as it starts: doubling
        (5, 0.5, (6, 32.0)),
        (6, 0.5, (7, 60.0)),  # capped
        (9, 0.5, (10, 60.0)),
        (9, 5.0, (1, 1.0)),  # it had been working: back to the first delay
        (3, 120.0, (1, 1.0)),
    ],
)
def test_restart_backoff(crashes: int, ran_s: float, expected: tuple[int, float]) -> None:
    assert restart_backoff(CFG, crashes, ran_s) == expected
