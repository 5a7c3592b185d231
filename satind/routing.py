"""One way to route a value to its handler by its type, everywhere satind does it: the core's
events, members' messages, the compute side's reports, timers, and the effects the node carries
out. A table from each type to its handler, looked up by the value's exact type; a value of a
type the table lacks raises ``NoRoute`` — a new event, report, timer or effect without its
handler is a bug to see at once, never something dropped in silence. (What comes off the wire
is another matter: the codec accepts only known message types, and the node refuses, with a
log line, a message a member may not send it: ``node/dispatch.py``.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, TypeVar

H = TypeVar("H")


class NoRoute(TypeError):
    """A value whose type has no handler in the table it was routed by."""


class Routes(Generic[H]):
    """Handlers by the exact type of what they handle (subclasses are not looked through:
    each type is named in its table, where a reader finds it)."""

    __slots__ = ("_table", "what")

    def __init__(self, what: str, table: Mapping[type, H]) -> None:
        self.what = what  # "event", "report", ...: for the error
        self._table = dict(table)

    def __getitem__(self, value: object) -> H:
        """The handler of ``value``.

        Raises:
            NoRoute: the table has no handler for its type.
        """
        try:
            return self._table[type(value)]
        except KeyError:
            raise NoRoute(
                f"no handler for the {self.what} {type(value).__qualname__}: add one to its table"
            ) from None

    def get(self, value: object) -> H | None:
        """The handler of ``value``, or None (for input that may be of any type)."""
        return self._table.get(type(value))

    def types(self) -> frozenset[type]:
        return frozenset(self._table)
