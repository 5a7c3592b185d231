"""What the compute side knows of a shared object's replica (satin-grid-programming-model
§4.2): its replication fields, the classes a peer may rebuild a replica of, rebuilding one
from another peer's state, and applying another peer's global call to it. The table of this
peer's replicas is ``engine/replica_table.py``.

The plugin author's face — ``SharedObject``, ``@global_method``, references in job
arguments — is ``satind/shared.py``, which registers its classes here. The compute side
(engine/worker.py, engine/replication.py) works through ``Replica`` and these functions
only, so it never imports the author's module (which imports the worker for ``CURRENT``).
"""

from __future__ import annotations

from typing import Any, Protocol

# Classes of shared objects by "module:qualname": a peer rebuilds a replica only of a class it
# has loaded itself, never one a message names. Filled by ``SharedObject.__init_subclass__``.
CLASSES: dict[str, type[Any]] = {}


class Replica(Protocol):
    """A shared object as the compute side sees it (``satind.shared.SharedObject``)."""

    # Its reproducible id (None until a job made it under satind).
    _shared_id: str | None
    # The run's epoch when it was made: replicas and calls of an older incarnation give way.
    _shared_inc: int
    # What of every peer's global calls this replica has applied: sender -> count.
    _shared_seen: dict[str, int]

    def shared_state(self) -> Any: ...

    def restore_shared(self, state: Any) -> None: ...


def class_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def apply_global(obj: Replica, method: str, args: tuple[Any, ...]) -> None:
    """Apply another peer's global call to this replica (without shipping it again)."""
    attr = getattr(type(obj), method, None)
    fn = getattr(attr, "_satind_global", None)
    if fn is None:
        raise LookupError(f"{class_name(type(obj))} has no global method {method!r}")
    fn(obj, *args)


def rebuild(
    cls_name: str, shared_id: str, state: Any, seen: dict[str, int], incarnation: int = 0
) -> Replica:
    """A replica from another peer's state.

    Raises:
        LookupError: this peer has no such class.
    """
    cls = CLASSES.get(cls_name)
    if cls is None:
        raise LookupError(f"no shared object class {cls_name} on this peer")
    obj: Replica = object.__new__(cls)
    obj._shared_seen = dict(seen)
    obj._shared_id = shared_id
    obj._shared_inc = incarnation
    obj.restore_shared(state)
    return obj
