"""The crash promise under the shipped defaults (issue 28): two daemons on fixed ports, nothing
tuned, the daemons restarting crashed peers. Every built-in plugin — every kind of run — has
its master SIGKILLed while it computes (on the machine that joined second), or a thief and
then the master; the restarted process in the master's slot is a newcomer, never taken for
the old one, and the answer equals an independent reference (tests/references.py).
`benchmarks/crashes.py` runs every plugin in both ways, many times. Here the plain
divide-and-conquer plugins; the other kinds in test_crash_kinds_procs.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.crashes import IN_CI, KINDS, Case, cases, run_case, two_machines
from tests.integration.test_daemon import Daemon, status

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def machines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Daemon, Daemon]]:
    keys = tmp_path_factory.mktemp("keys")
    with two_machines(keys) as (m1, m2):
        yield keys, m1, m2


def in_ci(kinds: bool) -> list[Case]:
    """The cases CI runs: of plain divide-and-conquer plugins, or of the other kinds."""
    return [c for c in cases() if c.name in IN_CI and (c.argv[0] in KINDS) == kinds]


@pytest.mark.parametrize("case", in_ci(kinds=False), ids=lambda c: c.name)
def test_a_killed_master_is_replaced_and_the_answer_is_exact(
    machines: tuple[Path, Daemon, Daemon], case: Case
) -> None:
    check_case(machines, case)


def check_case(machines: tuple[Path, Daemon, Daemon], case: Case) -> None:
    keys, m1, m2 = machines
    masters = {p["slot"]: p["name"] for p in status(keys, m1.first)["peers"]}
    outcome = run_case(keys, (m1, m2), case)
    run = next(r for r in status(keys, m1.first)["runs"] if r["run_id"] == outcome.report["run_id"])
    # The run ended under an elected master, never under the process that died (nor taken
    # for it by the new one in its slot: that one would have no run to end).
    assert run["state"] == "done" and run["master"] != masters[case.master], run
