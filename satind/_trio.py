"""Running trio at a process's edge."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import trio


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            out.extend(_leaves(exc))
        else:
            out.append(exc)
    return out


def run_flat(fn: Any, *args: Any) -> Any:
    """``trio.run``, with the exception groups of its nurseries flattened for the caller."""
    with single_errors():
        return trio.run(fn, *args)


@contextlib.contextmanager
def single_errors() -> Iterator[None]:
    """Let a lone exception out of a nursery as itself (a Ctrl-C first), not as a group."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        for leaf in leaves:
            if isinstance(leaf, KeyboardInterrupt):
                raise leaf from None
        if len(leaves) == 1:
            raise leaves[0] from None
        raise
