"""node/shipping.fetch: a member fetching a run's shipped code asks the members that have it
in turn, again for `[plugins] fetch_rounds` rounds while none answered (a loaded machine), and
once only when each answered (no such code): then the core is told it could not be had."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
import trio

from satind.config import Config
from satind.core.effects import FetchCode
from satind.core.shipping import CodeArrived
from satind.net import messages as m
from satind.node import shipping


@dataclass
class FakePeer:
    """What fetch uses of a peer: its settings, its clock and what it hands the core."""

    cfg: Config
    told: list[CodeArrived] = field(default_factory=list)
    state: Any = None

    def now(self) -> float:
        return trio.current_time()

    def apply(self, effects: Any) -> None:
        pass


def _peer(monkeypatch: pytest.MonkeyPatch) -> FakePeer:
    cfg = Config()
    cfg = replace(cfg, plugins=replace(cfg.plugins, accept_shipped=True))
    peer = FakePeer(cfg)

    def handle(state: Any, event: CodeArrived, now: float) -> list[Any]:
        peer.told.append(event)
        return []

    monkeypatch.setattr(shipping, "handle", handle)
    return peer


def _answers(
    monkeypatch: pytest.MonkeyPatch, replies: list[m.CodeReply | None]
) -> list[tuple[str, float]]:
    """Make ``ask`` answer with ``replies`` in order; returns who was asked, when."""
    asked: list[tuple[str, float]] = []

    async def ask(
        peer: Any, dest: str, make: Callable[[int], Any], kind: Any, within: float
    ) -> Any:
        asked.append((dest, trio.current_time()))
        return replies.pop(0)

    monkeypatch.setattr(shipping, "ask", ask)
    return asked


async def test_a_member_that_does_not_answer_is_asked_again(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    peer = _peer(monkeypatch)
    files = {"p.py": b"x = 1\n"}
    asked = _answers(monkeypatch, [None, None, m.CodeReply(1, "h", files)])
    taken: list[dict[str, bytes]] = []

    async def take(peer: Any, code_hash: str, got: dict[str, bytes], whence: str) -> str:
        taken.append(got)
        return ""

    monkeypatch.setattr(shipping, "_take", take)
    await shipping.fetch(peer, FetchCode("h", ("a/0", "b/0")))  # type: ignore[arg-type]
    assert [who for who, _ in asked] == ["a/0", "b/0", "a/0"]
    assert asked[2][1] - asked[1][1] == pytest.approx(peer.cfg.plugins.fetch_pause_s)
    assert taken == [files] and peer.told == []


async def test_after_every_round_unanswered_the_run_is_refused_saying_why(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    peer = _peer(monkeypatch)
    rounds = peer.cfg.plugins.fetch_rounds
    asked = _answers(monkeypatch, [None] * (2 * rounds))
    await shipping.fetch(peer, FetchCode("h", ("a/0", "b/0")))  # type: ignore[arg-type]
    assert len(asked) == 2 * rounds
    assert [event.error for event in peer.told] == ["b/0 did not answer"]


async def test_members_that_answer_they_have_no_such_code_are_asked_once(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    peer = _peer(monkeypatch)
    no = m.CodeReply(1, "h", error="a/0 does not have it")
    asked = _answers(monkeypatch, [no, None])
    await shipping.fetch(peer, FetchCode("h", ("a/0",)))  # type: ignore[arg-type]
    assert len(asked) == 1
    assert [event.error for event in peer.told] == ["a/0: a/0 does not have it"]
