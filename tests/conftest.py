"""What every test shares: daemons that tests start keep their run history (node/history.py)
in the test's own directory, never in the user's ~/.local/state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from satind.core import barrier
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


# The packages whose tests run with the core's write barrier on (core/barrier.py): the core's
# own tests and the simulator's, where every peer is real code in one process.
BARRIERED = ("core", "sim")


@pytest.fixture(autouse=True)
def _write_barrier(request: pytest.FixtureRequest) -> Iterator[None]:
    """In tests/core and tests/sim, a write of a peer's state outside ``handle`` fails the
    test that made it, saying where (h11's rule: core/__init__.py)."""
    parts = Path(str(request.node.fspath)).parts
    if "tests" not in parts or parts[parts.index("tests") + 1] not in BARRIERED:
        yield
        return
    barrier.enable()
    seen = len(barrier.violations)
    try:
        yield
    finally:
        barrier.enable(False)
    new = barrier.violations[seen:]
    del barrier.violations[seen:]
    assert not new, "the peer's state was written outside handle:\n" + "\n".join(new[:20])
