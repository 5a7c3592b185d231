"""Job ids (path stamps) and the Job record."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from satind.work.errors import ResultNotReady
from satind.work.jobs import (
    Job,
    RunState,
    child_path,
    format_path,
    is_ancestor,
    is_valid_path,
    path_from_indices,
    path_indices,
)

indices = st.lists(st.integers(min_value=0, max_value=2**40), max_size=30)


@given(indices)
def test_path_round_trip(idx: list[int]) -> None:
    assert path_indices(path_from_indices(idx)) == idx


@given(indices, indices)
def test_prefix_is_ancestry(a: list[int], b: list[int]) -> None:
    # A varint sequence is a prefix-free code: byte prefix <=> index-list prefix.
    pa, pb = path_from_indices(a), path_from_indices(b)
    assert is_ancestor(pa, pb) == (b[: len(a)] == a)


@given(indices, indices)
def test_distinct_paths_for_distinct_jobs(a: list[int], b: list[int]) -> None:
    assert (path_from_indices(a) == path_from_indices(b)) == (a == b)


def test_small_indices_take_one_byte_per_level() -> None:
    assert path_from_indices([0, 1, 127]) == bytes([0, 1, 127])
    assert len(child_path(b"", 128)) == 2
    assert format_path(b"") == "/"
    assert format_path(path_from_indices([3, 0, 200])) == "/3/0/200"


def test_truncated_path_is_rejected() -> None:
    bad = child_path(b"", 300)[:-1]
    assert not is_valid_path(bad)
    with pytest.raises(ValueError, match="truncated"):
        path_indices(bad)


def _run() -> RunState:
    return RunState("r", "p", 0.5)


def test_path_follows_parent_chain_and_respawn_gives_same_ids() -> None:
    run = _run()

    def tree() -> list[bytes]:
        root = Job(print, (), None, 0, run, 1.0)
        root.set_path(b"")
        a = Job(print, (), root, 0, run, 0.5)
        b = Job(print, (), root, 1, run, 0.5)
        c = Job(print, (), b, 2, run, 0.25)
        return [j.path for j in (root, a, b, c)]

    first = tree()
    assert first == [b"", b"\x00", b"\x01", b"\x01\x02"]
    assert tree() == first  # re-execution reproduces the ids


def test_stolen_job_path_is_its_own() -> None:
    job = Job(print, (), None, 0, _run(), 0.25)
    job.set_path(b"\x05\x01")
    child = Job(print, (), job, 3, job.run, 0.125)
    assert child.path == b"\x05\x01\x03"


def test_result_before_sync_raises() -> None:
    job = Job(print, (), None, 0, _run(), 1.0)
    with pytest.raises(ResultNotReady, match="before sync"):
        job.result()
    job.exc = KeyError("x")
    with pytest.raises(KeyError):
        job.result()
    job2 = Job(print, (), None, 0, _run(), 1.0)
    job2.value = None
    assert job2.result() is None and job2.done


def test_application_counters_sum_under_their_stats_names_and_are_bounded() -> None:
    run = RunState("r1", "test", 0.5)
    assert "app_nodes" not in run.counters()
    run.count("nodes", 3)
    run.count("nodes", 4)
    assert run.counters()["app_nodes"] == 7
    with pytest.raises(ValueError, match="lowercase letters"):
        run.count("Nodes!", 1)
    for i in range(15):
        run.count(f"c{i}", 1)
    with pytest.raises(ValueError, match="at most 16"):
        run.count("one_too_many", 1)
    run.count("c3", 1)  # an existing one still counts
    assert run.counters()["app_c3"] == 2


def test_count_outside_satind_does_nothing() -> None:
    import satind

    satind.count("nodes")  # no worker: a plain call, no error
