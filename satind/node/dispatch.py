"""Which handler each message goes to, and what a client may send.

Messages of the protocol go to the core's handlers (their effects applied by the peer), to
the node's procedures that have to wait (``control.py``, ``status.py``), or to the failure
detector (``membership/swim.py``). Replies are matched to the requests that wait for them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from satind.core import messages
from satind.core.events import Received
from satind.core.handle import handle
from satind.net import messages as m
from satind.net.transport import Link
from satind.node import (
    adapt,
    control,
    logged,
    logs,
    operators,
    permissions,
    plugins,
    recorder,
    shipping,
    status,
    tracing,
)
from satind.node.host import Host
from satind.node.logs import LogsHost
from satind.node.parsing import ParsingHost
from satind.node.recorder import RecorderHost
from satind.work.errors import error_info

log = logging.getLogger(__name__)


class Shell(LogsHost, ParsingHost, RecorderHost, Protocol):
    """A peer as the message dispatch sees it: every handler's host at once."""


def dispatch(peer: Shell, link: Link, msg: m.Message) -> None:
    """Hand a message to its handler. A client may send only client requests, and only those
    its certificate allows (node/permissions.py: refused with an ErrorReply saying which
    grant it takes); a request whose handler fails is answered with an ErrorReply; any other
    failure closes the connection (transport.handle_frame)."""
    handler = _HANDLERS.get(type(msg))
    if handler is None:
        log.warning("unexpected %s from %s", type(msg).__name__, link.remote_name)
        return
    if link.remote is not None and link.remote.role == "client":
        if type(msg) not in _CLIENT_OK:
            log.warning("client %s may not send %s", link.remote_name, type(msg).__name__)
            link.close()
            return
        why = permissions.refusal(peer.state, link, msg)
        if why:
            # Refused by what its certificate allows: said to the client, which goes on.
            log.warning("refused %s from %s: %s", type(msg).__name__, link.remote_name, why)
            refused = m.ErrorInfo("NotAllowed", why)
            if isinstance(msg, m.Submit):
                link.post(m.Submitted(msg.req, "", refused))
            elif hasattr(msg, "req"):
                link.post(m.ErrorReply(msg.req, refused))
            else:
                link.close()
            return
    try:
        handler(peer, link, msg)
    except Exception as exc:
        if type(msg) not in m.REQUEST_TYPES:
            raise  # the transport closes the connection, counts and logs it
        # A request whose handler failed (a plugin's code raised, or a bug): the asker
        # hears why now. The connection stays: the fault is ours, not the asker's.
        log.error("%s from %s failed", type(msg).__name__, link.remote_name, exc_info=exc)
        link.post(m.ErrorReply(msg.req, error_info(exc)))  # type: ignore[attr-defined]


def on_reply(peer: Host, link: Link, msg: Any) -> None:
    peer.requests.resolve(msg.req, msg)


def on_steal_reply(peer: Host, link: Link, msg: m.StealReply) -> None:
    if not peer.requests.resolve(msg.req, msg):
        sender = link.remote_name
        member = peer.table.get(sender)
        wide = member is not None and member.cluster != peer.state.cluster
        peer.thief.on_late_reply(msg, sender, wide)


def _core(peer: Host, link: Link, msg: Any) -> None:
    """A member's message for the core (core/messages.py): one call, its effects applied."""
    peer.apply(handle(peer.state, Received(link, msg), peer.now()))


def _swim(method: str) -> Any:
    def handler(peer: Host, link: Link, msg: Any) -> None:
        getattr(peer.swim, method)(link, msg)

    return handler


_HANDLERS: dict[type, Callable[[Shell, Link, Any], None]] = {
    m.StealReply: on_steal_reply,
    **{kind: _core for kind in messages.RULES.types()},
    **{answer: on_reply for answer in m.ANSWER_TYPES},
    m.Submit: control.on_submit,
    m.ProgressRequest: control.on_progress,
    m.ResultRequest: control.on_result_request,
    m.StatusRequest: status.on_status,
    m.DrainRequest: operators.on_drain_request,
    m.ReclaimRequest: operators.on_reclaim_request,
    m.Reclaim: operators.on_reclaim,
    m.LoadRequest: adapt.on_load_request,
    m.StopRequest: operators.on_stop_request,
    m.Shutdown: operators.on_shutdown,
    m.Drain: operators.on_drain,
    m.ResumeRequest: control.on_resume_request,
    m.SuspendRequest: control.on_suspend_request,
    m.CancelRequest: control.on_cancel_request,
    m.RunLog: logs.on_run_log,
    m.LogsRequest: logs.on_logs_request,
    m.PluginsRequest: plugins.on_plugins_request,
    m.TraceRequest: tracing.on_trace_request,
    m.CodeRequest: shipping.on_code_request,
    m.LogCopy: logged.on_log_copy,
    m.LogQuery: logged.on_log_query,
    m.HistoryRequest: recorder.on_history_request,
    m.HistoryLog: recorder.on_history_log,
    m.Ping: _swim("on_ping"),
    m.Ack: _swim("on_ack"),
    m.Nack: _swim("on_nack"),
    m.PingReq: _swim("on_ping_req"),
    m.PushPull: _swim("on_push_pull"),
    m.Gossip: _swim("on_gossip"),
}

# What a client (not a member) may ask of a peer.
_CLIENT_OK: frozenset[type] = frozenset(
    {
        m.Submit,
        m.ResumeRequest,
        m.SuspendRequest,
        m.CancelRequest,
        m.LogsRequest,
        m.PluginsRequest,
        m.TraceRequest,
        m.ProgressRequest,
        m.ResultRequest,
        m.StatusRequest,
        m.HistoryRequest,
        m.DrainRequest,
        m.ReclaimRequest,
        m.StopRequest,
        m.Shutdown,
    }
)
