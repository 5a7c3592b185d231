"""The plugin ``satind.Executor`` ships beside a script's code (client/executor.py): its jobs
call the script's plain functions, as a process pool's workers do.

This file is not imported by satind: its text is shipped, with the line ``MODULE = ""`` set to
the module that defines the submitted functions (the script's own name for ``__main__``). A
peer vets and imports it as any shipped plugin file, and so imports that module with it, under
the shipped version's package (plugin/siblings.py): the script's top level runs on the peers,
but not what is under its ``if __name__ == "__main__":``, as with ``ProcessPoolExecutor``.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import satind

MODULE = ""  # set when shipped
SHIPPED = False  # set when shipped: MODULE's file is shipped beside this one
# The script's module, imported when this file is (so the vetting imports it too): the one
# shipped beside this file, by its name in the shipped version's package (a script named
# test.py is not the standard library's test), or an installed one by its own name.
_module = (
    importlib.import_module(f"{__package__}.{MODULE}" if SHIPPED else MODULE) if MODULE else None
)


def _function(qualname: str) -> Any:
    target: Any = _module
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


@satind.spawnable
def call(qualname: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """``fn(*args, **kwargs)``: ``Executor.submit``'s run."""
    return _function(qualname)(*args, **kwargs)


@satind.spawnable
def map_items(qualname: str, items: Sequence[Sequence[Any]], leaf: int) -> list[Any]:
    """``[fn(*item) for item in items]``, in halves down to ``leaf`` items a job, in order:
    ``Executor.map``'s run, one divide-and-conquer tree for all the items."""
    if len(items) <= leaf:
        fn = _function(qualname)
        return [fn(*item) for item in items]
    # Split on a multiple of the leaf size: every leaf but the last has ``leaf`` items.
    mid = max(leaf, (len(items) // 2 + leaf - 1) // leaf * leaf)
    left = map_items.spawn(qualname, items[:mid], leaf)
    right = map_items.spawn(qualname, items[mid:], leaf)
    satind.sync()
    return list(left.result()) + list(right.result())


def _parse(argv: Sequence[str]) -> tuple[Any, ...]:
    raise satind.UsageError("an Executor's runs are submitted from Python (satind.Executor)")


PLUGIN = satind.Plugin(
    name="executor",
    entry=call,
    usage="(submitted by satind.Executor)",
    parse=_parse,
    max_branching=2,
    description="satind.Executor's calls of a script's functions",
)
