"""core/barrier.py: a write of a peer's state outside handle is seen, with where it was made;
inside handle, or before the state's first event (the node wiring it up), it is not."""

from __future__ import annotations

from satind.core import barrier
from satind.core.events import Synced
from satind.core.handle import handle
from tests.core.support import make_state


def test_a_write_outside_handle_is_recorded_once_the_state_has_handled_an_event() -> None:
    assert barrier.ON  # this package's tests run with it on (tests/conftest.py)
    state = make_state()
    seen = len(barrier.violations)
    state.standby = True  # set-up: before any event
    assert len(barrier.violations) == seen
    handle(state, Synced(), 1.0)  # a write inside handle (settled)
    assert state.settled and len(barrier.violations) == seen
    state.standby = False  # the node changing the state behind the core's back
    found = barrier.violations[seen:]
    del barrier.violations[seen:]  # seen here on purpose: not this test's failure
    assert len(found) == 1
    assert "test_barrier.py" in found[0] and found[0].endswith(": standby")
