"""Carrying out the core's effects (core/effects.py), in the order the core returned them:
messages to send, events for the compute side, gossip to spread, records for the checkpoint
log, tasks to start, waiters to wake, timers. This is the one place where a decision of the
core meets the world; a handler never sends or sleeps itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import trio

from satind.core.effects import (
    Changed,
    Checkpoint,
    Effects,
    EncodeArgs,
    FetchCode,
    HandOut,
    Log,
    QueueRoot,
    ReadLog,
    Remember,
    Reply,
    Send,
    Spread,
    StealUpdate,
    Task,
    Timer,
    ToCompute,
    WakeWaiters,
)
from satind.core.events import ReplyNotSent
from satind.core.handle import handle
from satind.core.state import PeerState
from satind.net import messages as m
from satind.node import control, logged, recorder, shipping
from satind.node.logs import LogsHost
from satind.node.recorder import RecorderHost
from satind.routing import Routes

log = logging.getLogger(__name__)


class EffectsHost(LogsHost, RecorderHost, Protocol):
    """A peer as the effects see it: its parts, its run logs (woken when a run ends) and its
    run history."""


def write_notes(state: PeerState) -> None:
    """Write what the core's rules noted (``PeerState.note``) to the log, under their module's
    logger, and forget them."""
    for note in state.notes:
        logging.getLogger(note.logger).log(note.level, note.message, *note.args)
    state.notes.clear()
    if state.notes_dropped:
        log.warning("%d log lines of the core were dropped (too many at once)", state.notes_dropped)
        state.notes_dropped = 0


def _hand_out(peer: EffectsHost, fx: HandOut) -> None:
    if not fx.link.post(fx.reply):
        peer.apply(handle(peer.state, ReplyNotSent(fx.reply, fx.job, fx.more), peer.now()))


def _spread(peer: EffectsHost, fx: Spread) -> None:
    if isinstance(fx.item, m.RunAnnounce):
        peer.swim.dissemination.add_run(fx.item)
    else:
        peer.announcer.add(fx.item)


def _checkpoint(peer: EffectsHost, fx: Checkpoint) -> None:
    if fx.why == "theft":
        peer.checkpointer.theft()
    else:
        peer.checkpointer.flush_soon()


def _wake_waiters(peer: EffectsHost, fx: WakeWaiters) -> None:
    for event in peer.result_waiters.pop(fx.run_id, []):
        event.set()


# Each effect to what carries it out: (the peer, the effect).
CARRY: Routes[Callable[[EffectsHost, Any], object]] = Routes(
    "effect",
    {
        Send: lambda peer, fx: peer.post(fx.dest, fx.msg),
        Reply: lambda peer, fx: fx.link.post(fx.msg),
        ToCompute: lambda peer, fx: peer.compute.post(fx.event),
        HandOut: _hand_out,
        Spread: _spread,
        Log: lambda peer, fx: _log(peer, fx),
        Checkpoint: _checkpoint,
        QueueRoot: lambda peer, fx: peer.compute.queue_root(fx.job),
        Task: lambda peer, fx: _task(peer, fx),
        EncodeArgs: lambda peer, fx: peer.spawn_answer(
            fx.link, fx.request.req, control.encode_and_hand_out, peer, fx
        ),
        WakeWaiters: _wake_waiters,
        StealUpdate: lambda peer, fx: peer.thief.update(),
        Changed: lambda peer, fx: peer.changed(),
        Timer: lambda peer, fx: peer.spawn_task(_timer, peer, fx),
        FetchCode: lambda peer, fx: peer.spawn_task(shipping.fetch, peer, fx),
        ReadLog: lambda peer, fx: peer.spawn_task(logged.read, peer, fx),
        Remember: lambda peer, fx: recorder.remember(peer, fx.run_id),
    },
)


def apply_effects(peer: EffectsHost, effects: Effects) -> None:
    """Carry out what the core decided, in order. An effect of a type ``CARRY`` lacks raises
    (``NoRoute``): a new effect is never dropped in silence."""
    for fx in effects:
        CARRY[fx](peer, fx)


async def _timer(peer: EffectsHost, fx: Timer) -> None:
    await trio.sleep(fx.delay)
    peer.apply(handle(peer.state, fx.event, peer.now()))


def _log(peer: EffectsHost, fx: Log) -> None:
    record = fx.record
    if fx.kind == "result":
        assert isinstance(record, m.JobResult)
        peer.checkpointer.result(record)
    elif fx.kind == "run":
        assert isinstance(record, m.RunAnnounce)
        peer.checkpointer.run(record)
    elif fx.kind == "barrier":
        assert isinstance(record, m.Barrier)
        peer.checkpointer.barrier(record)
    else:
        assert isinstance(record, m.RunAnnounce)
        peer.checkpointer.ended(record)
        peer.logs.wake.set()  # the run's last lines go to its master now


def _task(peer: EffectsHost, fx: Task) -> None:
    if fx.kind == "finish_run":
        peer.spawn_task(control.finish_run, peer, fx.run_id)
    elif fx.kind == "forward_result":
        peer.spawn_task(control.forward_result, peer, fx.run_id, fx.dest)
    else:
        peer.spawn_task(control.check_run, peer, fx.run_id)
