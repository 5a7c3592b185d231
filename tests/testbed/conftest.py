"""The testbed fixture: machines as network namespaces, each running a real `satind start`
with the shipped defaults on 0.0.0.0:7420 (satind/testbed/). It needs root (CAP_NET_ADMIN);
elsewhere these tests skip and say why (docs/testbed.md says how to run them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from satind.testbed import Testbed, unavailable

MakeTestbed = Callable[..., Testbed]


def _factory(root: Path) -> Iterator[MakeTestbed]:
    why = unavailable()
    if why:
        pytest.skip(f"no testbed here: {why}")
    made: list[Testbed] = []

    def make(count: int, **options: object) -> Testbed:
        bed = Testbed.up(count, root / f"bed{len(made)}", **options)  # type: ignore[arg-type]
        made.append(bed)
        return bed

    try:
        yield make
    finally:
        for bed in made:  # every process by id, every namespace and link
            bed.down()


@pytest.fixture
def testbed(tmp_path: Path) -> Iterator[MakeTestbed]:
    """``testbed(count, peers=2, ...)`` makes machines m1..mCOUNT for this test."""
    yield from _factory(tmp_path)


@pytest.fixture(scope="module")
def module_testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeTestbed]:
    """The same, shared by a module's tests (each machine start costs seconds)."""
    yield from _factory(tmp_path_factory.mktemp("testbed"))
