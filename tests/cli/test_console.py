"""The console (issue 32, point 3): the status tables never cut what an operator copies into
the next command (a run id, whatever its arguments, and a peer's name, at any terminal width);
an iterative or SPMD run's bar counts its iterations, and a bar's time goes on until its run
ends."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console
from rich.progress import Progress

from satind.cli.console import (
    BarView,
    bar_view,
    decisions_table,
    peers_table,
    run_bar,
    runs_table,
    show_bar,
    status_bar_view,
)
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


def test_the_coordinators_decisions_show_newest_last_and_none_without_any() -> None:
    assert decisions_table(_reply()) is None
    made = [
        m.AdaptDecision(1_700_000_000.0 + i, "r-1", 3, 0.25, f"drain m{i}/0", f"reason {i}")
        for i in range(7)
    ]
    peers = [
        m.PeerStatus("m1/0#a", "c0", "alive", decisions=made[::2]),
        m.PeerStatus("m2/0#b", "c0", "alive", decisions=made[1::2]),
    ]
    table = decisions_table(m.StatusReply(0, peers, []))
    assert table is not None
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(table)
    lines = [line for line in console.export_text().splitlines() if "reason" in line]
    # The five newest, in time order, each with its coordinator's slot.
    assert [line.split("reason ")[1].split()[0] for line in lines] == ["2", "3", "4", "5", "6"]
    assert "m1/0" in lines[0] and "drain m2/0" in lines[0] and "0.25" in lines[0]


class _Clock:
    """rich's clock for a bar, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _bar_text(progress: Progress) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(progress.get_renderable())
    return console.export_text()


def test_an_spmd_run_shows_its_iteration_and_a_time_that_goes_on() -> None:
    # What follow_run shows from a progress snapshot of `heat2d 200 200 300` at iteration 206:
    # before, its tree's share (1.0 after the first iteration) gave a full bar whose elapsed
    # time stopped there.
    clock = _Clock()
    progress = run_bar(Console(file=io.StringIO()), get_time=clock)
    task = progress.add_task("heat2d 200 200 300 8", total=1.0, rate="", done="")
    reply = m.ProgressReply(0, "r-1", 0.6866, {"jobs_run": 1648}, iteration=206, iterations=300)
    show_bar(progress, task, bar_view(reply.progress, reply.iteration, reply.iterations), "")
    clock.now += 30.8
    shown = _bar_text(progress)
    assert "iteration 206 of 300" in shown and "100.0%" not in shown
    assert "0:00:30" in shown
    clock.now += 60
    assert "0:01:30" in _bar_text(progress)


def test_a_full_bar_keeps_counting_until_the_run_ends() -> None:
    # A tree done while the members' statistics and the check are under way.
    clock = _Clock()
    progress = run_bar(Console(file=io.StringIO()), get_time=clock)
    task = progress.add_task("fib 30", total=1.0, rate="", done="")
    show_bar(progress, task, bar_view(1.0), "")
    clock.now += 5
    assert "100.0%" in _bar_text(progress) and "0:00:05" in _bar_text(progress)


def test_an_iterative_run_without_a_known_end_counts_iterations() -> None:
    assert bar_view(0.9, 7, 0) == BarView(7, None, "iteration 7")
    assert bar_view(0.25) == BarView(0.25, 1.0, " 25.0%")
    clock = _Clock()
    progress = run_bar(Console(file=io.StringIO()), get_time=clock)
    task = progress.add_task("kmeans", total=1.0, rate="", done="")
    show_bar(progress, task, bar_view(1.0, 7, 0), "")
    assert progress.tasks[0].total is None  # a bar that pulses, not a full one
    assert "iteration 7" in _bar_text(progress)


def test_status_shows_an_iterative_runs_iterations_not_a_share_of_its_tree() -> None:
    spmd = m.RunStatus(
        "r-s", "heat2d", [], "a/0", "running", 206 / 300, 1.0, {"iteration": 206, "iterations": 300}
    )
    iterative = m.RunStatus("r-i", "kmeans", [], "a/0", "running", 1.0, 1.0, {"iteration": 7})
    assert status_bar_view(spmd) == BarView(206, 300, "iteration 206 of 300")
    console = Console(width=160, record=True)
    console.print(runs_table(m.StatusReply(0, [], [spmd, iterative])))
    rows = console.export_text().splitlines()
    assert "68.7%" in next(line for line in rows if "r-s" in line)
    assert "206/300" in next(line for line in rows if "r-s" in line)
    assert "100.0%" not in next(line for line in rows if "r-i" in line)


def test_on_80_columns_the_iterations_are_short_and_the_times_keep_their_room() -> None:
    clock = _Clock()
    progress = run_bar(Console(file=io.StringIO()), get_time=clock)
    task = progress.add_task("heat2d 200 200 300 8", total=1.0, rate="", done="")
    rate = "1,449 jobs/s · 0.0 steals/s"
    show_bar(progress, task, bar_view(0.6866, 206, 300, wide=False), rate)
    clock.now += 30.8
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(progress.get_renderable())
    shown = console.export_text()
    assert "206/300" in shown and "0:00:30" in shown and rate in shown


TMUX_SCRIPT = """
import sys
from satind.cli.console import print_status
from satind.net import messages as m

run = m.RunStatus(
    "20261129-045215-8d3577", "nqueens", ["15"], "node-a/0#k2j9x1", "running", 0.42, 12.3,
    {"jobs_run": 12345},
)
peers = [
    m.PeerStatus(f"node-{c}/{i}#k2j9x1", "site-1", "alive", queue=3, jobs_run=1234,
                 stolen_local=12, cpu_percent=97.0, rss_mb=48.0)
    for c in "ab" for i in range(2)
]
print_status(m.StatusReply(0, peers, [run]))
print("END", flush=True)
"""


@pytest.mark.skipif(shutil.which("tmux") is None, reason="no tmux here (.ci/run installs it)")
def test_plain_status_is_readable_in_an_80_column_terminal(tmp_path: Path) -> None:
    """`satind status` in a real 80-column terminal (tmux): fourteen columns made every header
    and cell "a…"; the narrow tables keep every value whole."""
    script = tmp_path / "show.py"
    script.write_text(TMUX_SCRIPT)
    session = f"satind-test-{os.getpid()}"
    command = f"{sys.executable} {script}; sleep 30"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "40", command], check=True
    )
    try:
        shown = ""
        deadline = time.monotonic() + 20
        while "END" not in shown and time.monotonic() < deadline:
            time.sleep(0.2)
            shown = subprocess.run(
                ["tmux", "capture-pane", "-t", session, "-p"], capture_output=True, text=True
            ).stdout
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False)
    assert "END" in shown, shown
    assert "…" not in shown, shown
    run_id = "20261129-045215-8d3577"
    for whole in ("node-a/0", "node-b/1", "alive", "1,234", "97", "stolen", run_id, "nqueens 15"):
        assert whole in shown, (whole, shown)
    assert max(len(line) for line in shown.splitlines()) <= 80
