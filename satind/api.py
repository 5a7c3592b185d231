"""The plugin author's spawn/sync API (re-exported by ``satind``).

    @spawnable
    def fib(n: int) -> int:
        if n < 2:
            return n
        a = fib.spawn(n - 1)
        b = fib.spawn(n - 2)
        sync()
        return a.result() + b.result()

``fib(30)`` stays a plain sequential call. ``fib.spawn(n)`` records a job that satind may run
here or on another peer; ``sync()`` waits for every spawn of the running job; after it,
``handle.result()`` gives the value or raises the child's exception. Without satind (the
plugin imported by a test or a notebook) ``spawn`` calls the function at once and ``sync``
does nothing, so the program gives its sequential answer.

As in Satin, assume neither call-by-value nor call-by-reference: a local spawn passes
references, a stolen one copies its arguments through CBOR. Do not mutate arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from satind.engine import worker as _worker
from satind.engine.errors import LimitExceeded
from satind.engine.jobs import Job

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class Handle(Protocol[R_co]):
    """What a spawn returns."""

    def result(self) -> R_co:
        """The child's value after ``sync()``; raises the child's exception if it raised."""
        ...


class _Done(Generic[R]):
    """The handle of a spawn outside satind: the call already ran."""

    __slots__ = ("exc", "value")

    def __init__(self, value: R | None, exc: BaseException | None) -> None:
        self.value = value
        self.exc = exc

    def result(self) -> R:
        if self.exc is not None:
            raise self.exc
        return self.value  # type: ignore[return-value]


class DuplicateSpawnableError(ValueError):
    """Two different functions registered under one name; a thief could not tell them apart."""


# Spawnable functions by name. A stolen job names its function; the thief looks it up here and
# never imports anything a message names, so a peer runs only code it has loaded itself.
_REGISTRY: dict[str, Spawnable[Any]] = {}


class Spawnable(Generic[R]):
    """A function that can be spawned. Calling it is a plain call."""

    __slots__ = ("__dict__", "fn", "name")

    def __init__(self, fn: Callable[..., R]) -> None:
        self.fn = fn
        self.name = f"{fn.__module__}:{fn.__qualname__}"
        self.__wrapped__ = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__

    def __call__(self, *args: Any) -> R:
        return self.fn(*args)

    def spawn(self, *args: Any) -> Handle[R]:
        """Spawn ``fn(*args)``: it may run here later or on another peer. See ``sync``."""
        w = _worker.CURRENT
        if w is None:
            try:
                return _Done(self.fn(*args), None)
            except Exception as exc:
                return _Done(None, exc)
        # The hot path of every spawn: keep it to attribute reads and one allocation.
        cur = w.current
        pending = cur.pending + 1
        if pending > w.max_pending:
            raise _too_many(w.max_pending)
        cur.pending = pending
        index = cur.nspawn
        cur.nspawn = index + 1
        run = cur.run
        job = Job(self.fn, args, cur, index, run, cur.share * run.inv_branching)
        if run.orphans is not None and w.adopt(job):
            return job  # an orphan's kept result stands in for it (recovery/orphans.py)
        w.jobs.append(job)
        return job

    def __repr__(self) -> str:
        return f"<spawnable {self.name}>"


def _too_many(limit: int) -> LimitExceeded:
    return LimitExceeded(
        f"a job spawned {limit} jobs without syncing (engine.max_pending_jobs): does it spawn "
        "without bound before it syncs? Spawn fewer, larger jobs, or raise the limit"
    )


def spawnable(fn: Callable[..., R]) -> Spawnable[R]:
    """Make ``fn`` spawnable with ``fn.spawn(...)``; ``fn(...)`` stays a plain call.

    Positional arguments only, and only values CBOR can carry (see docs/plugins.md), since a
    stolen job's arguments travel to another peer.

    Raises:
        DuplicateSpawnableError: another function already has this module and qualified name.
    """
    sp = Spawnable(fn)
    known = _REGISTRY.get(sp.name)
    if known is not None and _where(known.fn) != _where(fn):
        # Loading the same source again is harmless; a second function with the same name is
        # not.
        raise DuplicateSpawnableError(
            f"spawnable {sp.name} is defined twice; give one of them another name"
        )
    _REGISTRY[sp.name] = sp
    return sp


def _where(fn: Callable[..., Any]) -> tuple[str, int]:
    code = fn.__code__
    return code.co_filename, code.co_firstlineno


def sync() -> None:
    """Wait for every job the running job spawned; afterwards their ``result()`` is ready."""
    w = _worker.CURRENT
    if w is None:
        return
    cur = w.current
    cur.nsync += 1
    if cur.pending:
        w.sync_frame(cur)


def forget_module(module: str) -> None:
    """Drop the spawnables a module registered (it is about to be loaded again, changed:
    ``satind plugins reload``). Jobs already made keep the functions they hold."""
    prefix = f"{module}:"
    for name in [n for n in _REGISTRY if n.startswith(prefix)]:
        del _REGISTRY[name]


def lookup_spawnable(name: str) -> Spawnable[Any] | None:
    """The spawnable registered under ``name`` ("module:qualname"), if this process has it."""
    return _REGISTRY.get(name)


def name_of(fn: Callable[..., Any]) -> str:
    """The registry name of a plain function that a Spawnable wraps."""
    return f"{fn.__module__}:{fn.__qualname__}"
