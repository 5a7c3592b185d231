"""Shared objects with guard consistency (satin-grid-programming-model §3.2, §4.2).

A ``SharedObject`` made in a job is replicated on every peer that runs a job it is passed to;
jobs read their peer's replica with plain (*local*) methods, and change every replica with
*global* methods (``@global_method``): the call is applied here at once and shipped to every
other peer (function shipping), which applies it at a safe point of its compute side. Updates
are best effort: a peer may miss one or see one late. A spawnable's *guard*
(``Spawnable.guard``) states what a stolen job needs of its replicas; it is evaluated before a
stolen job runs, and while it is false the job waits for updates, then fetches the replicas
from the peer it stole the job from, which ran the job's parent and so has replicas that
satisfy it (data shipping). The engine side is engine/worker.py (``Worker.shared``), the
network side core/sharing.py.

A shared object travels as a reference (its id), never as its state, except when a replica is
fetched. Its id is reproducible: the run, the path of the job that made it and how many shared
objects that job had made before, so a job run again after a crash or under a new master's
epoch makes the object with the same id, and references in stolen jobs still find it.

Without satind (a test, a notebook) a shared object is an ordinary object and a global method
an ordinary method: the program gives its sequential answer.

State: by default an object's replica is its public attributes (``vars`` without names that
start with "_"), which must be values CBOR carries; override ``shared_state`` and
``restore_shared`` for anything else. Global methods' arguments must be CBOR values too.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from satind.engine import worker as _worker
from satind.engine.replicas import CLASSES, apply_global, class_name, rebuild
from satind.net import values
from satind.net.errors import DecodeError, EncodeError

F = TypeVar("F", bound=Callable[..., Any])


class SharedObject:
    """Base class of objects replicated on every peer (see the module's docstring)."""

    _shared_id: str | None = None
    # The run's epoch when it was made: a new master's epoch makes it again with a fresh
    # state, and replicas and calls of an older incarnation give way.
    _shared_inc: int = 0
    # What of every peer's global calls this replica has applied: sender -> count.
    _shared_seen: dict[str, int]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        CLASSES[class_name(cls)] = cls

    def __new__(cls, *args: Any, **kwargs: Any) -> SharedObject:
        obj = super().__new__(cls)
        obj._shared_seen = {}
        w = _worker.CURRENT
        if w is not None and w.current is not w.idle_frame:
            w.share(obj)  # its id, and this peer's replica of it
        return obj

    def shared_state(self) -> Any:
        """The replica's state, as CBOR values (default: the public attributes)."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def restore_shared(self, state: Any) -> None:
        """Make this replica ``state`` (what ``shared_state`` gave on another peer)."""
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise TypeError(f"a replica's state must be a map of attributes, got {type(state)}")
        for key in [k for k in vars(self) if not k.startswith("_")]:
            delattr(self, key)
        vars(self).update(state)


def global_method(fn: F) -> F:
    """Mark a method of a SharedObject as global: applied here, then on every replica."""

    @functools.wraps(fn)
    def call(self: SharedObject, *args: Any) -> Any:
        result = fn(self, *args)
        w = _worker.CURRENT
        if w is not None and self._shared_id is not None:
            w.shared_call(self, fn.__name__, args)
        return result

    call._satind_global = fn  # type: ignore[attr-defined]
    return call  # type: ignore[return-value]


# -- references in job arguments ------------------------------------------------------------

SHARED_TAG = 39002


def _reference(obj: SharedObject) -> Any:
    if obj._shared_id is None:
        raise EncodeError(
            f"a {type(obj).__qualname__} made outside a job cannot travel: make shared objects "
            "inside the job that spawns with them"
        )
    return [obj._shared_id, class_name(type(obj))]


def _resolve(ref: Any) -> Any:
    if not (isinstance(ref, list | tuple) and len(ref) == 2 and isinstance(ref[0], str)):
        raise DecodeError("bad shared object reference")
    w = _worker.CURRENT
    obj = w.shared.get(ref[0]) if w is not None else None
    if obj is None:
        raise DecodeError(f"no replica of shared object {ref[0]} on this peer (it was not fetched)")
    return obj


values.register_reference(SharedObject, SHARED_TAG, _reference, _resolve)


__all__ = ["SharedObject", "apply_global", "class_name", "global_method", "rebuild"]
