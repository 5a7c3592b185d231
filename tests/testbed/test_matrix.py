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


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_run_survives_each_machine_fault_with_the_exact_answer(bed: Testbed, fault: str) -> None:
    outcome = run_fault(bed, fault)
    assert outcome.report["check"] == "ok" or outcome.report["check"].startswith("not checked")
