"""The crash promise under the shipped defaults for the other kinds of run (shared objects,
iterative, SPMD): as test_crash_procs.py, in a file of its own so that the suite's two
workers share the cases."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.crashes import Case, two_machines
from tests.integration.test_crash_procs import check_case, in_ci
from tests.integration.test_daemon import Daemon

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def machines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Daemon, Daemon]]:
    keys = tmp_path_factory.mktemp("keys")
    with two_machines(keys) as (m1, m2):
        yield keys, m1, m2


@pytest.mark.parametrize("case", in_ci(kinds=True), ids=lambda c: c.name)
def test_a_killed_master_is_replaced_and_the_answer_is_exact(
    machines: tuple[Path, Daemon, Daemon], case: Case
) -> None:
    check_case(machines, case)
