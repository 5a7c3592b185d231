"""node/effects.py: what the node does with what the core decided."""

from __future__ import annotations

import logging

import pytest

from satind.core.effects import DEBUG, WARNING
from satind.node.effects import write_notes
from tests.core.support import make_state


def test_the_node_writes_the_notes_to_the_log_and_forgets_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = make_state()
    state.note_level = DEBUG
    state.note(WARNING, "satind.core.restart", "restarting %s: %s is %s", "r1/0a", "b/0", "dead")
    with caplog.at_level(logging.DEBUG, logger="satind.core"):
        write_notes(state)
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        ("satind.core.restart", logging.WARNING, "restarting r1/0a: b/0 is dead")
    ]
    assert state.notes == []
