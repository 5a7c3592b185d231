"""Γ, the IOS migration gain (satind/reconfig/gain.py), on hand-made cases."""

from __future__ import annotations

import math

import pytest

from satind.reconfig.gain import comm_s, delta, entity_gain, gain

CPU = {"cpu": 1.0}


def test_delta_is_the_relative_difference_of_available_and_used() -> None:
    assert delta(3.0, 1.0) == pytest.approx(0.5)
    assert delta(1.0, 3.0) == pytest.approx(-0.5)
    assert delta(2.0, 2.0) == 0.0
    assert delta(0.0, 0.0) == 0.0  # a resource nobody has or uses


@pytest.mark.parametrize(
    ("available", "used", "migration_s", "life_s", "migrate"),
    [
        # An idle machine (1 free CPU) asks a node whose entities get a third of its CPU:
        # Δ = (1 - 1/3) / (1 + 1/3) = 0.5; a 1 s migration over 100 s of life costs
        # 1 / (10 + ln 100) = 0.069: migrate.
        (1.0, 1 / 3, 1.0, 100.0, True),
        # The same with a 10 s migration: 10 / 14.6 = 0.68 > 0.5: stay.
        (1.0, 1 / 3, 10.0, 100.0, False),
        # The foreign node is no better (it has what P uses here): only the cost: stay.
        (0.5, 0.5, 0.1, 1000.0, False),
        # A loaded foreign node (a quarter CPU free) for entities that get a full CPU here.
        (0.25, 1.0, 0.0, 1000.0, False),
        # A free migration to a better node: any life expectancy.
        (1.0, 0.5, 0.0, 0.0, True),
    ],
)
def test_gamma_decides_on_hand_made_cases(
    available: float, used: float, migration_s: float, life_s: float, migrate: bool
) -> None:
    d = gain(CPU, {"cpu": available}, {"cpu": used}, migration_s, life_s)
    assert d.migrate is migrate
    assert d.gain == pytest.approx(d.benefit - d.cost)


def test_a_longer_life_makes_the_same_migration_worth_it() -> None:
    args = (CPU, {"cpu": 1.0}, {"cpu": 0.7}, 2.5)
    assert not gain(*args, life_s=10.0).migrate  # 0.176 < 2.5 / 12.3
    assert gain(*args, life_s=1e6).migrate  # 0.176 > 2.5 / 23.8


def test_weights_mix_resources_and_are_checked() -> None:
    weights = {"cpu": 0.75, "bandwidth": 0.25}
    d = gain(weights, {"cpu": 1.0, "bandwidth": 10.0}, {"cpu": 0.5, "bandwidth": 30.0}, 0, 1)
    assert d.benefit == pytest.approx(0.75 * (1 / 3) + 0.25 * (-0.5))
    with pytest.raises(ValueError, match="sum to 1"):
        gain({"cpu": 0.5}, {}, {}, 0, 1)
    with pytest.raises(ValueError, match="negative"):
        gain(CPU, {"cpu": -1.0}, {}, 0, 1)
    assert gain(CPU, {"cpu": 1.0}, {"cpu": 0.5}, 1.0, 100.0, log_base=10).cost == pytest.approx(
        1 / (10 + math.log10(100))
    )


def test_the_network_weighs_what_an_entity_spends_its_iteration_on() -> None:
    # Issue 34, point 1: Γ with the communication term, from the exchange graph.
    rtt = {("a", "b"): 0.020, ("a", "c"): 0.020, ("b", "c"): 0.020}

    def one_way(x: str, y: str) -> float:
        return rtt.get((min(x, y), max(x, y)), 0.0) / 2

    def bandwidth(x: str, y: str) -> float:
        return 1e6 if "c" not in (x, y) else 1e5  # c's links are ten times slower

    # Two neighbours, both held on a: nothing here, two remote exchanges on b.
    here = comm_s("a", ["a", "a"], one_way, 10_000, bandwidth)
    there = comm_s("b", ["a", "a"], one_way, 10_000, bandwidth)
    assert here == 0.0 and there == pytest.approx(2 * (0.010 + 0.010))
    # The bandwidth is the link's: on c, the same bytes take ten times as long.
    assert comm_s("c", ["a", "a"], one_way, 10_000, bandwidth) == pytest.approx(2 * (0.010 + 0.1))
    # The same CPU gain (a whole CPU there against half of one here) for two entities: one
    # that computes 1 s per iteration moves, one that computes 10 ms stays with its
    # neighbours (its iteration would be mostly waiting for ghosts there).
    heavy = entity_gain(0.5, 1.0, 1.0, here, there, 0.01, 100.0)
    light = entity_gain(0.5, 1.0, 0.010, here, there, 0.01, 100.0)
    assert heavy.migrate and not light.migrate
    # Neighbours on the thief: moving there removes the exchanges, a gain by itself.
    toward = entity_gain(1.0, 1.0, 0.010, there, here, 0.0, 100.0)
    assert toward.benefit > 0.5
    # No communication at all: the CPU alone, as before.
    assert entity_gain(0.5, 1.0, 1.0, 0.0, 0.0, 0.0, 100.0).benefit == pytest.approx(1 / 3)
