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

Speculative parallelism (satin-grid-programming-model §3.3): ``fn.spawn_inlet(handler, ...)``
spawns a job whose exception, if it raises one, is handed to ``handler`` — the *inlet* — in
the spawner's frame, and ``abort()`` cancels every child of the running job that has not
finished. Sequentially, ``spawn_inlet`` calls the handler at once and ``abort`` does nothing,
which is still a correct program (only a slower one). See engine/speculation.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from satind.engine import worker as _worker
from satind.work import spawnables
from satind.work.jobs import Job
from satind.work.reports import TaskReady

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
        return self._spawn(args, None)

    def _spawn(
        self, args: tuple[Any, ...], inlet: Callable[[Exception], Any] | None
    ) -> Handle[Any]:
        """``spawn`` and ``spawn_inlet``: one native call from either (compiled, a call
        between compiled methods is a C call)."""
        w = _worker.CURRENT
        if w is None:
            try:
                return _Done(self.fn(*args), None)
            except Exception as exc:
                if inlet is None:
                    return _Done(None, exc)
                return _Done(inlet(exc), None)  # the inlet at once: the sequential meaning
        # The hot path of every spawn: keep it to attribute reads and one allocation.
        cur = w.current
        pending = cur.pending + 1
        if pending > w.max_pending:
            # Too many, or a cancelled job runs here and this frame may be in it. Events
            # handled there may finish children of this frame: count again.
            w.spawn_check(cur, pending)
            pending = cur.pending + 1
        cur.pending = pending
        index = cur.nspawn
        cur.nspawn = index + 1
        run = cur.run
        job = Job(self.fn, args, cur, index, run, cur.share * run.inv_branching)
        if inlet is not None:
            job.inlet = inlet  # before an orphan's kept result may stand in for it
        if run.orphans is not None and w.adopt(job):
            return job  # an orphan's kept result stands in for it (core/orphans.py)
        w.jobs.append(job)
        return job

    def push(self, *args: Any) -> Handle[R]:
        """Spawn ``fn(*args)`` as a task of an iterative run (satind/iterative.py): it goes to
        the master's scheduler, which places it on a worker with the run's heuristic, instead
        of the queue thieves steal from. See ``sync``. Outside satind it runs at once."""
        w = _worker.CURRENT
        if w is None:
            try:
                return _Done(self.fn(*args), None)
            except Exception as exc:
                return _Done(None, exc)
        cur = w.current
        cur.pending += 1
        index = cur.nspawn
        cur.nspawn = index + 1
        run = cur.run
        run.pushed = True
        job = Job(self.fn, args, cur, index, run, cur.share * run.inv_branching)
        w.hooks.report(TaskReady(job))
        return job

    def spawn_inlet(self, handler: Callable[[Exception], Any], *args: Any) -> Handle[Any]:
        """Spawn ``fn(*args)`` with an inlet: if the job raises an exception, ``handler(exc)``
        runs in the spawner's frame (on this peer, whichever peer ran the job), at a sync of
        the spawner, one handler at a time and never while the spawner's own code runs. The
        handler may read and change the spawner's variables (a closure), spawn, and call
        ``abort()``, and sync (the handlers of children that raise meanwhile run after
        it returns). What it returns is the handle's ``result()``; if it raises, the
        spawner's other children are aborted and its ``sync()`` raises that exception. A job
        that returns normally runs no handler. An exception arrives as itself when its type
        is registered (``satind.register_type``); see docs/plugins.md."""
        return self._spawn(args, handler)

    def guard(self, fn: Callable[..., bool]) -> Callable[..., bool]:
        """Decorator: ``fn(*args)`` — same arguments as the job — says whether this peer's
        replicas of the shared objects a stolen job uses are recent enough for it to run
        (Satin's guard consistency, satind/shared.py). Checked before a job stolen from
        another peer runs (a job run where it was spawned sees its parent's replicas); while
        it is false the job waits for updates, then fetches the replicas from its victim."""
        _worker.GUARDS[self.fn] = fn
        return fn

    def __repr__(self) -> str:
        return f"<spawnable {self.name}>"


def spawnable(fn: Callable[..., R]) -> Spawnable[R]:
    """Make ``fn`` spawnable with ``fn.spawn(...)``; ``fn(...)`` stays a plain call.

    Positional arguments only, and only values CBOR can carry (see docs/plugins.md), since a
    stolen job's arguments travel to another peer.

    Raises:
        DuplicateSpawnableError: another function already has this module and qualified name.
    """
    sp = Spawnable(fn)
    known = spawnables.lookup(sp.name)
    if known is not None and _where(known.fn) != _where(fn):
        # Loading the same source again is harmless; a second function with the same name is
        # not.
        raise DuplicateSpawnableError(
            f"spawnable {sp.name} is defined twice; give one of them another name"
        )
    spawnables.register(sp)  # by name, for thieves (work/spawnables.py)
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


def abort() -> None:
    """Cancel every child of the running job that has not finished: children still queued
    are dropped, children other peers stole are told to stop (and stop their own thieves),
    and their ``result()`` raises ``JobAborted``. Results that already arrived stay, and
    their inlets still run. Asynchronous and best effort: it returns at once, and a child
    that finishes before the abort reaches it costs its work, never a wrong answer. Outside
    satind it does nothing."""
    w = _worker.CURRENT
    if w is not None:
        w.abort_children(w.current)


def pause_point() -> None:
    """A point where a long job may be suspended: if this peer's machine was reclaimed by its
    owner (`satind reclaim`), the job waits here until it is released, then goes on. Costs one
    attribute read otherwise. Jobs are suspended anyway before they start; call this in a long
    loop so that a reclaim takes effect within it. Outside satind it does nothing."""
    w = _worker.CURRENT
    if w is not None and w.reclaimed:
        w.suspend()


def count(name: str, n: int = 1) -> None:
    """Add ``n`` to the application counter ``name`` of the running job's run: the run's
    statistics show it as ``app_<name>``, summed over peers (work redone after a crash is
    counted again). For what only the plugin can count, such as the nodes a search visited.
    ``name``: lowercase letters, digits and ``_``, at most 32; a run has at most
    ``MAX_APP_COUNTERS`` names. Outside satind it does nothing.

    Raises:
        ValueError: a bad name, or one name too many.
    """
    w = _worker.CURRENT
    if w is not None:
        w.current.run.count(name, n)


def lookup_spawnable(name: str) -> Spawnable[Any] | None:
    """The spawnable registered under ``name`` ("module:qualname"), if this process has it."""
    found = spawnables.lookup(name)
    return found if isinstance(found, Spawnable) else None
