"""A peer's drain, in its trio shell: stop taking work, finish what is here, hand the runs it
masters and its results over, then leave; past the deadline, cut what is left and leave at
once. The decisions are core/drain.py's; this module only waits and applies them."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import trio

from satind.core import drain as rules
from satind.core.events import DrainAsked, DrainDeadlinePassed, DrainDone, DrainRound
from satind.core.handle import handle

if TYPE_CHECKING:
    from satind.node.host import Host

log = logging.getLogger("satind.node.peer")  # as when it was part of node/peer.py


def drain(peer: Host, reason: str, leaving: Sequence[str] = (), deadline_s: float = -1.0) -> None:
    """Drain ``peer`` (core/drain.py); past the deadline (``deadline_s``, negative: ``[daemon]
    drain_deadline_s``; a drain already under way only ever gets an earlier one), cut what is
    left and leave at once (core/drain.cut). ``leaving``: the members drained with this one
    (none of them inherits a run)."""
    was_draining = peer.state.draining
    peer.apply(handle(peer.state, DrainAsked(reason, leaving), peer.now()))
    # Negative (or NaN, from a hostile request): the configured deadline.
    deadline_s = deadline_s if deadline_s >= 0 else peer.cfg.daemon.drain_deadline_s
    deadline = trio.current_time() + deadline_s
    if was_draining:
        if peer.drain_scope is not None and deadline < peer.drain_scope.deadline:
            log.info("draining: the deadline is now %.3g s from now (%s)", deadline_s, reason)
            peer.drain_scope.deadline = deadline
        return
    # Made here, not in the task: a second request in the same tick may bring it forward.
    scope = peer.drain_scope = trio.CancelScope(deadline=deadline)
    peer.swim.set_draining()
    if deadline_s < peer.cfg.daemon.drain_deadline_s:
        log.info("draining with a deadline of %.3g s", deadline_s)

    async def until_drained() -> None:
        while True:
            # The runs it masters go to a peer that stays (once there is one).
            peer.apply(handle(peer.state, DrainRound(), peer.now()))
            if rules.drained(peer.state):
                return
            await peer.wait_changed()

    async def finish() -> None:
        with scope:
            await until_drained()
        if scope.cancelled_caught:
            log.warning("the drain's deadline passed: cutting the work left and leaving")
            peer.apply(handle(peer.state, DrainDeadlinePassed(), peer.now()))
            with trio.move_on_after(peer.cfg.daemon.cut_grace_s):
                await until_drained()
        peer.apply(handle(peer.state, DrainDone(), peer.now()))
        peer.leave()

    peer.spawn_task(finish)
