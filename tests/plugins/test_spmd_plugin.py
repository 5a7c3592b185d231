"""The plugin side of SPMD runs (satind/spmd.py) without peers: the run outside satind is the
same loop sequentially (heat2d equals a whole-plate sweep), and a neighbours relation that
would make a step wait for ever is refused with a message that says so."""

from __future__ import annotations

import pytest
from satind_plugins import _heat, heat2d

from satind.spmd import _check_neighbours


def test_heat2d_outside_satind_is_the_whole_plate_swept() -> None:
    args = heat2d.PLUGIN.parse_args(["12", "7", "9", "5"])
    assert heat2d.PLUGIN.entry.fn(*args) == _heat.sequential(12, 7, 9)


@pytest.mark.parametrize(
    ("neighbours", "says"),
    [
        ([[1], [2], [0]], "must be symmetric"),  # a one-way ring
        ([[1], [0, 2]], "from 0 to 1"),  # a neighbour that does not exist
        ([[0]], "another entity"),  # its own neighbour
    ],
)
def test_a_neighbours_relation_that_would_hang_is_refused(
    neighbours: list[list[int]], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        _check_neighbours(neighbours)


def test_a_line_and_a_ring_are_fine() -> None:
    _check_neighbours([[1], [0, 2], [1]])
    _check_neighbours([[1, 2], [0, 2], [0, 1]])
