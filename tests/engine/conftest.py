"""The compute side on its own: a worker with recording hooks, current for the test
(tests/engine/test_worker.py, test_speculation.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from satind.config import EngineConfig
from satind.engine import worker as worker_mod
from satind.engine.worker import Worker
from tests.engine.test_worker import Hooks


@pytest.fixture
def worker() -> Iterator[Worker]:
    w = Worker(EngineConfig(), Hooks())
    worker_mod.CURRENT = w
    try:
        yield w
    finally:
        worker_mod.CURRENT = None
