"""The compute thread's large data stack chunk (satind/engine/datastack.py)."""

from __future__ import annotations

import sys

import pytest

from satind.config import EngineConfig
from satind.engine.datastack import on_a_large_chunk


def depth(n: int) -> int:
    return 0 if n == 0 else 1 + depth(n - 1)


@pytest.mark.parametrize("slots", [0, -1, 1024, EngineConfig().data_stack_bytes // 8])
def test_the_work_runs_and_its_result_comes_back(slots: int) -> None:
    # 600 frames: more than one 16 KB chunk holds, fewer than the default recursion limit
    assert on_a_large_chunk(lambda: depth(600), slots) == 600


def test_an_exception_of_the_work_passes_through() -> None:
    def fail() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        on_a_large_chunk(fail, 1 << 17)


def test_the_big_frame_is_the_callers_own_code_with_more_room() -> None:
    seen: list[int] = []

    def look() -> None:
        caller = sys._getframe(1).f_code
        seen.append(caller.co_stacksize)

    on_a_large_chunk(look, 1 << 17)
    on_a_large_chunk(look, 0)
    assert seen[0] == (1 << 17) // 2
    assert seen[1] < 100  # called plainly: the caller is on_a_large_chunk itself
