"""Membership tests run many SWIM members in one trio run on the mock clock. trio shuffles the
order of tasks that become runnable together, at random: pin that order (as the simulator
does), so that a test's outcome depends on its seed only. Randomized schedules are explored
by sweeping seeds, not by chance in CI."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from satind.sim.determinism import deterministic_trio


@pytest.fixture(autouse=True)
def _deterministic_scheduling() -> Iterator[None]:
    with deterministic_trio(0):
        yield
