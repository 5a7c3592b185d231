"""The status tables never cut what an operator copies into the next command (issue 32,
point 3): a run id, whatever its arguments, and a peer's name, at any terminal width."""

from __future__ import annotations

import pytest
from rich.console import Console

from satind.cli.console import peers_table, runs_table
from satind.net import messages as m


def _reply() -> m.StatusReply:
    run = m.RunStatus(
        "20261126-080502-835a4b",
        "tree",
        ["3"] * 40,  # a long argument list
        "node-alpha-long/0#k2j9x1",
        "running",
        0.5,
        3.0,
        {},
    )
    peers = [m.PeerStatus(f"node-alpha-long/{i}#k2j9x1", "c0", "alive") for i in range(2)]
    return m.StatusReply(0, peers, [run])


@pytest.mark.parametrize("width", [80, 111, 120, 139, 160])
def test_run_ids_and_peer_names_are_never_cut(width: int) -> None:
    console = Console(width=width, record=True)
    console.print(runs_table(_reply()))
    console.print(peers_table(_reply()))
    out = console.export_text()
    assert "20261126-080502-835a4b" in out
    assert "node-alpha-long/0" in out and "node-alpha-long/1" in out


def test_a_cancelled_run_shows_no_made_up_progress() -> None:
    run = m.RunStatus("r-1", "tree", ["3"], "a/0#x", "cancelled", 0.0, 2.0, {})
    console = Console(width=160, record=True)
    console.print(runs_table(m.StatusReply(0, [], [run])))
    row = next(line for line in console.export_text().splitlines() if "r-1" in line)
    assert "0.0%" not in row and "cancelled" in row
