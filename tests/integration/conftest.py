"""Fixtures of the tests that start real daemons: a keys directory (a CA, node certificates
m1 and m2, the client certificate) and two machines of two peers each."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_daemon import Daemon, satind


@pytest.fixture(scope="session")
def key_material(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Made once per worker by the CLI (three commands, about a second and a quarter)."""
    made = tmp_path_factory.mktemp("key-material")
    assert satind("keys", "init", str(made)).returncode == 0
    for name in ("m1", "m2"):
        assert satind("keys", "issue", str(made), name).returncode == 0
    return made


@pytest.fixture
def keys(tmp_path: Path, key_material: Path) -> Path:
    """A test's own copy of the keys (its daemons' logs and its own certificates go there
    too); the same CA in every test of a worker, as no two tests' daemons meet."""
    shutil.copytree(key_material, tmp_path, dirs_exist_ok=True)
    return tmp_path


@pytest.fixture
def two_machines(keys: Path) -> Iterator[tuple[Daemon, Daemon]]:
    m1 = Daemon(keys, "m1", "east")
    m2 = Daemon(keys, "m2", "west", m1.first)
    try:
        yield m1, m2
    finally:
        m1.kill()
        m2.kill()
