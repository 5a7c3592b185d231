"""A member's message, into the core: which rule each message of the peer protocol goes to.

Only what members send each other to steal, return results, keep custody, abort, share
objects, run iterative and SPMD runs and hand runs over is the core's; client requests,
SWIM's probes and gossip and the answers to requests stay with the node (node/dispatch.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from satind.core import aborts, custody, drain, iterative, master, sharing, spmd, victim
from satind.core.effects import Effects, Link
from satind.net import messages as m
from satind.routing import Routes

if TYPE_CHECKING:
    from satind.core.state import PeerState

# (state, the link it came on, the message, now) -> effects.
Rule = Callable[["PeerState", Link, Any, float], Effects]


def _task_push(state: PeerState, link: Link, msg: m.TaskPush, now: float) -> Effects:
    if msg.entity is not None:
        return spmd.on_push(state, link.remote_name, msg)
    return iterative.on_push(state, link.remote_name, msg, now)


RULES: Routes[Rule] = Routes(
    "message",
    {
        m.StealRequest: lambda s, link, msg, now: victim.on_steal_request(s, link, msg, now),
        m.JobResult: lambda s, link, msg, now: custody.on_job_result(s, link.remote_name, msg, now),
        m.JobQuery: lambda s, link, msg, now: custody.on_job_query(s, link, msg),
        m.JobState: lambda s, link, msg, now: custody.on_job_state(s, link.remote_name, msg, now),
        m.HandOver: lambda s, link, msg, now: drain.on_hand_over(s, msg, now),
        m.Abort: lambda s, link, msg, now: aborts.on_abort(s, link.remote_name, msg),
        m.SharedUpdates: lambda s, link, msg, now: sharing.on_updates(s, msg),
        m.ReplicaRequest: lambda s, link, msg, now: sharing.on_replica_request(
            s, link.remote_name, msg
        ),
        m.ReplicaReply: lambda s, link, msg, now: sharing.on_replica_reply(s, msg),
        m.SharedDigest: lambda s, link, msg, now: sharing.on_digest(s, link.remote_name, msg),
        m.TaskPush: _task_push,
        m.TaskAck: lambda s, link, msg, now: iterative.on_ack(s, link.remote_name, msg, now),
        m.Barrier: lambda s, link, msg, now: iterative.on_barrier(s, msg),
        m.Ghost: lambda s, link, msg, now: spmd.on_ghost(s, msg),
        m.EntityMove: lambda s, link, msg, now: spmd.on_move(s, link.remote_name, msg, now),
        m.EntityState: lambda s, link, msg, now: spmd.on_state(s, link.remote_name, msg, now),
        m.EntityMoved: lambda s, link, msg, now: spmd.on_moved(s, link.remote_name, msg, now),
        m.MigrateRequest: lambda s, link, msg, now: spmd.on_migrate_request(
            s, link.remote_name, msg, now
        ),
        m.EntityLeaving: lambda s, link, msg, now: spmd.on_leaving(s, link.remote_name, msg, now),
        m.GhostRequest: lambda s, link, msg, now: spmd.on_ghost_request(s, msg),
        m.RunShare: lambda s, link, msg, now: master.on_share(s, msg),
        m.ResultCopy: lambda s, link, msg, now: master.on_result_copy(s, msg, now),
        m.RunStatsRequest: lambda s, link, msg, now: master.on_run_stats(s, link, msg),
    },
)


def on_message(state: PeerState, link: Link, msg: m.Message, now: float) -> Effects:
    """The effects of a member's message (one of ``RULES``' types)."""
    return RULES[msg](state, link, msg, now)
