"""A debug write barrier on ``PeerState``: h11's rule — a peer's state changes only inside
``handle`` (core/handle.py) — checked as the code runs, so that a peer's behaviour is a
function of the events it got (and a recording of them replays it).

Off by default: it costs a check on every write of a state attribute. ``enable()`` turns it on
(the suite does, for tests/core and tests/sim: tests/conftest.py). Then every write of an
attribute of a ``PeerState`` outside ``handle`` is recorded in ``violations`` with where it was
made — once the state has handled its first event: the writes before are the node wiring a
new state up. It sees attributes set (``state.x = ...``), not objects changed in place
(``state.runs.active[...]``): those are the rules' own tables, changed by rules.
"""

from __future__ import annotations

import sys

ON = False
# Calls of handle under way (nested: an event handled while another is, in a test).
_depth = 0
# "file:line in function: attribute" of each write seen outside handle.
violations: list[str] = []
# Where the barrier does not look: a write made by one of these modules is the state's own
# book-keeping of what it is told to note (PeerState.note, called by rules).
_OWN = ("satind/core/state.py",)


def enable(on: bool = True) -> None:
    global ON
    ON = on


def enter() -> None:
    global _depth
    _depth += 1


def leave() -> None:
    global _depth
    _depth -= 1


def written(sealed: bool, name: str) -> None:
    """An attribute ``name`` of a state was set (``sealed``: it has handled an event)."""
    if _depth or not sealed:
        return
    frame = sys._getframe(2)  # the writer: past PeerState.__setattr__
    where = frame.f_code.co_filename
    if where.endswith(_OWN):
        return
    violations.append(f"{where}:{frame.f_lineno} in {frame.f_code.co_name}: {name}")
