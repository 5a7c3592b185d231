"""Run a thread's work on one large interpreter data stack chunk.

CPython (3.11 and later) keeps a function's frame in chunks of a per-thread "data stack": 16 KB
at first, each further one allocated with mmap when a call does not fit and unmapped as soon as
the frame at its base returns. A recursion that goes back and forth across the end of a chunk
maps and unmaps a chunk (and faults its pages in) on nearly every call. Which recursion does
that depends only on how deep in the chunk it happens to start: knapsack 80's one big leaf ran
in 0.9 s or in 3.9 s on the same peer depending on whether the engine beneath it was compiled
(compiled functions take no Python frames, so the leaf started a few frames lower, across the
end of the first chunk; docs/benchmarks.md, issue 18).

The cure is to start the work inside a frame that asks for a large chunk: the interpreter then
maps one chunk of ``slots`` pointers (rounded up to 16 KB times a power of two), and every
frame called from there, to a depth of thousands of ordinary frames, fits in what the big frame
leaves free. The chunk is reserved address space; only the pages frames touch become resident.
The frame is made large by raising its code object's ``co_stacksize`` (the room for its value
stack), which it never uses.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def _call(fn: Callable[[], T]) -> T:
    return fn()


def on_a_large_chunk(fn: Callable[[], T], slots: int) -> T:
    """fn(), from a frame whose data stack chunk holds about ``slots`` pointers (0: plainly).

    The big frame takes half the chunk, so about ``slots / 2`` pointers (8 bytes each) are
    left for the frames of ``fn`` and everything it calls."""
    if slots <= 0:
        return fn()
    big = _call.__code__.replace(co_stacksize=slots // 2)
    call: Callable[[Callable[[], T]], T] = types.FunctionType(big, _call.__globals__)
    return call(fn)
