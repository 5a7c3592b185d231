"""Fixtures of the tests that start real daemons: a keys directory (a CA, node certificates
m1 and m2, the client certificate) and two machines of two peers each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_daemon import Daemon, satind


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    assert satind("keys", "init", str(tmp_path)).returncode == 0
    for name in ("m1", "m2"):
        assert satind("keys", "issue", str(tmp_path), name).returncode == 0
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
