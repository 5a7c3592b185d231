"""What a client may ask of a peer: the grants of its certificate (net/tls.py ``GRANTS``),
checked by every peer on every request before it is handled (docs/operations.md, "What a
client may do").

- ``submit``: submit runs; cancel, suspend, resume and read (result, logs, progress, trace)
  the runs it submitted itself — a run's owner is the name of the client certificate that
  submitted it (``RunInfo.owner``), known to every member with the run;
- ``operate``: drain, reclaim, release and stop peers, reload plugins, and cancel, suspend,
  resume or read any run;
- either: the cluster's status and its plugins; but only an operator sees the arguments of
  every run there (``shown_to``), a client with the submit grant those of its own runs.

A peer that does not know a run (it ended long ago, or the peer joined since) cannot tell
its owner: only an operator may ask that peer about it. The certificate of the embedded
default's client (``satind run``, ``satind.run_local``) has every grant.
"""

from __future__ import annotations

from dataclasses import replace

from satind.core.effects import Link
from satind.core.state import PeerState
from satind.net import messages as m
from satind.net import tls
from satind.net.names import client_base_name

# Requests that only an operator may make.
_OPERATE = (m.DrainRequest, m.ReclaimRequest, m.StopRequest, m.Shutdown)
# Requests about one run: its owner (with the submit grant) or an operator.
_ABOUT_A_RUN = (
    m.CancelRequest,
    m.SuspendRequest,
    m.ResultRequest,
    m.LogsRequest,
    m.ProgressRequest,
    m.TraceRequest,
)
# Requests any client may make (a client with the submit grant lists its own runs only).
_ANYONE = (m.StatusRequest, m.HistoryRequest)


def client_name(link: Link) -> str:
    """The client certificate's name behind a connection (``alice~3f2a`` -> ``alice``)."""
    return client_base_name(link.remote_name)


def owner_of(state: PeerState, run_id: str) -> str | None:
    """Who submitted a run, as far as this peer knows it (None: it does not know the run)."""
    runs = state.runs
    info: m.RunInfo | None = None
    if run_id in runs.active:
        info = runs.active[run_id].info
    elif run_id in runs.finished:
        info = runs.finished[run_id].info
    elif run_id in runs.ended:
        info = runs.ended[run_id].info
    elif run_id in runs.queued_elsewhere:
        info = runs.queued_elsewhere[run_id]
    else:
        info = next((r.info for r in runs.queue if r.info.run_id == run_id), None)
    if info is None:
        return runs.history_owners.get(run_id)
    return info.owner


def refusal(state: PeerState, link: Link, msg: m.Message) -> str:
    """Why this client may not send ``msg`` ("" when it may). Members are not asked."""
    remote = link.remote
    if remote is None or remote.role != tls.ROLE_CLIENT:
        return ""
    grants = remote.grants
    name = client_name(link)
    if isinstance(msg, m.Submit):
        why = _lacks(name, grants, tls.GRANT_SUBMIT, "submit a run")
        if not why and msg.files:
            why = _lacks(name, grants, tls.GRANT_SHIP, "ship code with a run")
        return why
    if isinstance(msg, _OPERATE) or (isinstance(msg, m.PluginsRequest) and msg.reload):
        return _lacks(name, grants, tls.GRANT_OPERATE, f"send a {type(msg).__name__}")
    if isinstance(msg, (*_ANYONE, m.PluginsRequest)):
        return status_refusal(name, grants)
    if isinstance(msg, _ABOUT_A_RUN):
        return about_run(state, name, grants, msg.run_id, type(msg).__name__)
    if isinstance(msg, m.ResumeRequest):
        # Its owner is in the checkpoint, read when the request is handled (node/control.py).
        if grants & {tls.GRANT_SUBMIT, tls.GRANT_OPERATE}:
            return ""
        return _lacks(name, grants, tls.GRANT_SUBMIT, "resume a run")
    return f"client {name} may not send a {type(msg).__name__}: it is for members only"


def status_refusal(name: str, grants: frozenset[str]) -> str:
    """Why client ``name`` may not read the cluster's status ("" if it may)."""
    if grants & {tls.GRANT_SUBMIT, tls.GRANT_OPERATE}:
        return ""
    return _lacks(name, grants, tls.GRANT_SUBMIT, "read the cluster's status")


def sees_arguments(state: PeerState, name: str, grants: frozenset[str], run_id: str) -> bool:
    """Whether client ``name`` may see a run's arguments in the cluster's status: an
    operator sees every run's, a client with the submit grant its own runs' only (as `satind
    runs` lists only its own runs); a run whose owner this peer does not know is not its."""
    return tls.GRANT_OPERATE in grants or owner_of(state, run_id) == name


def shown_to(link: Link, state: PeerState, runs: list[m.RunStatus]) -> list[m.RunStatus]:
    """The runs' status lines as the client behind ``link`` may read them: the arguments of
    runs that are not its own emptied (``sees_arguments``). Members see everything."""
    remote = link.remote
    if remote is None or remote.role != tls.ROLE_CLIENT:
        return runs
    name = client_name(link)
    return [
        r if sees_arguments(state, name, remote.grants, r.run_id) else replace(r, argv=[])
        for r in runs
    ]


def about_run(state: PeerState, name: str, grants: frozenset[str], run_id: str, what: str) -> str:
    """Why client ``name`` may not make a request about run ``run_id`` ("" if it may)."""
    if tls.GRANT_OPERATE in grants:
        return ""
    if tls.GRANT_SUBMIT not in grants:
        return _lacks(name, grants, tls.GRANT_SUBMIT, f"send a {what}")
    owner = owner_of(state, run_id)
    if owner == name:
        return ""
    whose = (
        f"run {run_id} was submitted by {owner or 'a client of an older version'}"
        if owner is not None
        else f"this peer ({state.name}) does not know run {run_id}, so not whose it is"
    )
    return (
        f"client {name} may {what} only about its own runs, and {whose}; that takes a "
        f"certificate with the {tls.GRANT_OPERATE!r} grant "
        f"(`satind keys issue DIR NAME --client --may-operate`)"
    )


def _lacks(name: str, grants: frozenset[str], grant: str, what: str) -> str:
    if grant in grants:
        return ""
    has = ", ".join(sorted(grants)) or "none"
    flag = "" if grant == tls.GRANT_SUBMIT else f" --may-{grant}"
    return (
        f"client {name} may not {what}: that takes the {grant!r} grant, and its certificate "
        f"has {has} (issue one with `satind keys issue DIR NAME --client{flag}`)"
    )
