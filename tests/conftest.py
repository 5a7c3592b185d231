"""What every test shares: daemons that tests start keep their run history (node/history.py)
in the test's own directory, never in the user's ~/.local/state."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scheduling import WaitingApart


@pytest.fixture(autouse=True)
def _history_in_tmp(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


# The files that take longest, longest first: the suite's workers take files in collection
# order (pytest-xdist --dist loadfile), and a long file taken last keeps one worker busy
# alone at the end (the 5-minute partition did: 31 minutes in all). Measured on this
# project's 2-core machine with --durations; the rest keep their order.
LONGEST_FIRST = (
    "tests/testbed/test_partitions.py",
    "tests/integration/test_crash_kinds_procs.py",
    "tests/integration/test_crash_procs.py",
    "tests/testbed/test_matrix.py",
    "tests/integration/test_recovery_procs.py",
    "tests/integration/test_checkpoint_procs.py",
    "tests/testbed/test_restarts.py",
    "tests/integration/test_spmd_procs.py",
    "tests/integration/test_iterative_procs.py",
    "tests/integration/test_logged_procs.py",
    "tests/sim/test_simulator.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    last = len(LONGEST_FIRST)

    def key(item: pytest.Item) -> int:
        return rank.get(item.nodeid.split("::", 1)[0], last)

    items.sort(key=key)  # stable: the order within a file, and of the rest, stays


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> WaitingApart | None:
    """`--dist loadfile` (pyproject.toml's default) with the waiting files apart:
    tests/scheduling.py."""
    if config.getvalue("dist") != "loadfile":
        return None
    return WaitingApart(config, log)
