"""Running trio at a process's edge."""

from __future__ import annotations

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
    """``trio.run``, with the exception groups of its nurseries flattened for the caller.

    A Ctrl-C wins over everything else; a single failure is raised as itself; several are
    raised as the group.
    """
    try:
        return trio.run(fn, *args)
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        for leaf in leaves:
            if isinstance(leaf, KeyboardInterrupt):
                raise leaf from None
        if len(leaves) == 1:
            raise leaves[0] from None
        raise
