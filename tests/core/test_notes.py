"""The core logs nothing itself: its rules note lines in the state (``PeerState.note``), and the
node writes them under the rule's logger after it applied the effects (node/effects.py)."""

from __future__ import annotations

from satind.core import master
from satind.core.effects import INFO, WARNING, Note
from satind.core.state import MAX_NOTES
from satind.net import messages as m
from satind.plugin import hooks
from tests.core.support import FIB, FakeLink, make_state


def test_a_run_that_starts_is_noted_under_the_start_rules_logger() -> None:
    state = make_state()
    msg = m.Submit(7, "fib", ["12"], FIB.code_hash)
    parsed = hooks.parse_submission(FIB, msg.argv, state.cfg.net.max_frame_bytes)
    master.submit(state, FakeLink("client~1", role="client"), msg, parsed, 1.0)
    assert state.notes == [
        Note(INFO, "satind.core.start", "run %s: %s %s", ("run-0", "fib", "12")),
    ]


def test_notes_below_the_level_the_log_shows_are_not_kept_and_the_rest_are_bounded() -> None:
    state = make_state()
    state.note_level = WARNING
    state.note(INFO, "satind.core.x", "quiet")
    assert state.notes == []
    for i in range(MAX_NOTES + 5):
        state.note(WARNING, "satind.core.x", "line %d", i)
    assert len(state.notes) == MAX_NOTES and state.notes_dropped == 5
    assert state.notes[0].args == (5,)  # the oldest went
