"""The owner watch's decision (ops/owner.py): reclaim quickly when other processes keep the
CPUs busy, release slowly once they stop, and never on a short burst."""

from __future__ import annotations

import os

import pytest

from satind.config import OwnerConfig
from satind.ops.owner import OwnerWatch, own_cpu_s, process_cpu_s

CFG = OwnerConfig(
    reclaim=True, reclaim_above=0.5, reclaim_after_s=10, release_below=0.25, release_after_s=30
)


def verdicts(samples: list[tuple[float, float]]) -> list[tuple[float, bool]]:
    watch = OwnerWatch(CFG)
    out = []
    for now, load in samples:
        verdict = watch.update(now, load)
        if verdict is not None:
            out.append((now, verdict))
    return out


def test_a_sustained_load_reclaims_after_its_delay_and_its_end_releases_after_a_longer_one() -> (
    None
):
    busy = [(float(t), 0.9) for t in range(0, 15)]
    quiet = [(float(t), 0.1) for t in range(15, 60)]
    assert verdicts(busy + quiet) == [(10.0, True), (45.0, False)]


@pytest.mark.parametrize(
    "loads",
    [
        [0.9] * 9 + [0.2] + [0.9] * 9,  # two bursts of 9 s, a dip between: never 10 s
        [0.5] * 30,  # at the threshold, not above it
    ],
)
def test_bursts_and_the_threshold_itself_reclaim_nothing(loads: list[float]) -> None:
    assert verdicts([(float(t), load) for t, load in enumerate(loads)]) == []


def test_a_load_between_the_thresholds_keeps_a_reclaim() -> None:
    samples = [(float(t), 0.9) for t in range(11)] + [(float(t), 0.4) for t in range(11, 100)]
    assert verdicts(samples) == [(10.0, True)]


def test_the_daemons_own_cpu_time_is_read_from_proc() -> None:
    if not os.path.exists(f"/proc/{os.getpid()}/stat"):
        pytest.skip("no /proc here: the owner watch measures nothing (and says so)")
    sum(i * i for i in range(300_000))
    mine = process_cpu_s(os.getpid())
    assert mine > 0
    assert process_cpu_s(2**22 + 12345) == 0.0  # no such process
    assert own_cpu_s([])[os.getpid()] >= mine  # the daemon's own (read later: never less)
    assert set(own_cpu_s([2**22 + 12345])) == {os.getpid(), 2**22 + 12345}
