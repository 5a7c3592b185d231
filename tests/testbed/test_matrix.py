"""The crash matrix's short form (issue 45, point 5): each machine-level fault once, mid-run, on
four machines of two peers with the shipped defaults; every answer exact, every client
answered. `benchmarks/crashes.py --testbed` runs it with every plugin, many times."""

from __future__ import annotations

import pytest

from satind.testbed import Testbed
from tests.testbed.conftest import MakeTestbed
from tests.testbed.matrix import FAULTS, run_fault


@pytest.fixture(scope="module")
def bed(module_testbed: MakeTestbed) -> Testbed:
    return module_testbed(4, peers=2)


# A paused master and a partitioned master's machine are the suite's too, with more runs
# (tests/testbed/test_restarts.py, tests/testbed/test_partitions.py): the benchmark runs them
# here.
IN_SUITE = sorted(set(FAULTS) - {"pause-master", "partition-master"})


@pytest.mark.parametrize("fault", IN_SUITE)
def test_a_run_survives_each_machine_fault_with_the_exact_answer(bed: Testbed, fault: str) -> None:
    outcome = run_fault(bed, fault)
    assert outcome.report["check"] == "ok" or outcome.report["check"].startswith("not checked")
