"""Victim choice (RS, CRS) and back-off, as case tables."""

from __future__ import annotations

import random

import pytest

from satind.config import StealConfig
from satind.core.stealing import Candidates, backoff_delay, candidates, plan_round

MEMBERS = [("a", "c0"), ("b", "c0"), ("c", "c0"), ("d", "c1"), ("e", "c1")]


def test_candidates_split_by_cluster_without_self() -> None:
    assert candidates("a", "c0", MEMBERS) == Candidates(("b", "c"), ("d", "e"))
    assert candidates("d", "c1", MEMBERS) == Candidates(("e",), ("a", "b", "c"))
    assert candidates("x", "c9", [("x", "c9")]) == Candidates((), ())


@pytest.mark.parametrize(
    ("algorithm", "victims", "wide_in_flight", "wide", "sync", "sync_is_wide"),
    [
        # CRS: one wide-area request when none is out, plus a synchronous local steal.
        ("crs", Candidates(("b",), ("d",)), False, "d", "b", False),
        # CRS: a wide-area request is out: local steals only.
        ("crs", Candidates(("b",), ("d",)), True, None, "b", False),
        # CRS alone in its cluster: nothing synchronous to do.
        ("crs", Candidates((), ("d",)), False, "d", None, False),
        ("crs", Candidates((), ("d",)), True, None, None, False),
        # CRS in a single cluster behaves like RS inside it.
        ("crs", Candidates(("b",), ()), False, None, "b", False),
        # RS: synchronous, to anyone, never asynchronous.
        ("rs", Candidates((), ("d",)), False, None, "d", True),
        ("rs", Candidates(("b",), ()), True, None, "b", False),
        ("rs", Candidates((), ()), False, None, None, False),
    ],
)
def test_plan_round_cases(
    algorithm: str,
    victims: Candidates,
    wide_in_flight: bool,
    wide: str | None,
    sync: str | None,
    sync_is_wide: bool,
) -> None:
    plan = plan_round(algorithm, random.Random(1), victims, wide_in_flight)  # type: ignore[arg-type]
    assert (plan.wide, plan.sync, plan.sync_is_wide) == (wide, sync, sync_is_wide)


def test_rs_sends_most_requests_wide_with_two_equal_clusters() -> None:
    # (C-1)/C of RS's requests cross clusters (satin §4.1.2): here 5 of the 10 others.
    members = [(f"l{i}", "c0") for i in range(5)] + [(f"r{i}", "c1") for i in range(5)]
    victims = candidates("a", "c0", [*members, ("a", "c0")])
    rng = random.Random(7)
    wide = sum(plan_round("rs", rng, victims, False).sync_is_wide for _ in range(10_000))
    assert 0.45 < wide / 10_000 < 0.55
    # CRS never waits on a wide-area request.
    assert all(not plan_round("crs", rng, victims, False).sync_is_wide for _ in range(1000))


def test_victim_choice_is_uniform_and_seeded() -> None:
    victims = Candidates(("b", "c", "d"), ())
    picks = [plan_round("crs", random.Random(3), victims, False).sync for _ in range(3)]
    assert len(set(picks)) == 1  # same seed, same choice
    rng = random.Random(5)
    counts = {v: 0 for v in victims.local}
    for _ in range(3000):
        sync = plan_round("crs", rng, victims, False).sync
        assert sync is not None
        counts[sync] += 1
    assert all(900 < c < 1100 for c in counts.values())


def test_backoff_starts_at_zero_doubles_and_caps() -> None:
    cfg = StealConfig(backoff_after=2, backoff_min_s=0.001, backoff_max_s=0.01)
    delays = [backoff_delay(cfg, f) for f in range(8)]
    assert delays[:2] == [0.0, 0.0]
    assert delays[2:6] == [0.001, 0.002, 0.004, 0.008]
    assert delays[6:] == [0.01, 0.01]
    assert backoff_delay(cfg, 10_000) == 0.01
