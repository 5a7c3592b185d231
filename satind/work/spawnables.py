"""The registry of spawnable functions by name ("module:qualname"), below both threads.

A stolen job names its function; the thief looks it up here and never imports anything a
message names, so a peer runs only code it has loaded itself. The plugin author's API
(``satind.api.spawnable``) registers; the protocol core looks up (a stolen job, a run's root
submitted as a function) without importing the compute side, and the plugin loader forgets a
module's functions before loading it again. Written when a plugin loads (the trio thread, or a
thread the node runs a load in, one at a time), read when a job is stolen: a dict, whose single
operations the interpreter makes atomic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class Registered(Protocol):
    """What the registry holds: a spawnable (``satind.api.Spawnable``), as the core sees it."""

    @property
    def name(self) -> str: ...

    @property
    def fn(self) -> Callable[..., Any]: ...

    def __call__(self, *args: Any) -> Any:
        """A plain call of the function."""
        ...


_REGISTRY: dict[str, Registered] = {}


def register(sp: Registered) -> None:
    _REGISTRY[sp.name] = sp


def lookup(name: str) -> Registered | None:
    """The spawnable registered under ``name``, or None if this process has none."""
    return _REGISTRY.get(name)


def forget_module(module: str) -> None:
    """Drop the spawnables a module registered (it is about to be loaded again, changed:
    ``satind plugins reload``). Jobs already made keep the functions they hold."""
    prefix = f"{module}:"
    for name in [n for n in _REGISTRY if n.startswith(prefix)]:
        del _REGISTRY[name]


def is_spawnable(obj: object) -> bool:
    """Whether ``obj`` is a spawnable this process has registered (every ``@spawnable``
    function is, when it is made): how the plugin descriptor checks an entry without
    importing the author's API, which loads the compute side."""
    name = getattr(obj, "name", None)
    return isinstance(name, str) and _REGISTRY.get(name) is obj


def name_of(fn: Callable[..., Any]) -> str:
    """The registry name of a plain function that a spawnable wraps."""
    return f"{fn.__module__}:{fn.__qualname__}"
