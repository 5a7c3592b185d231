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


@pytest.hookimpl(optionalhook=True)  # `-p no:xdist` runs without it
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> WaitingApart | None:
    """`--dist loadfile` (pyproject.toml's default) with the waiting files apart:
    tests/scheduling.py."""
    if config.getvalue("dist") != "loadfile":
        return None
    return WaitingApart(config, log)
