"""What the node's mechanisms may use of their peer: the shell's declared interface.

``node/peer.py`` composes a peer from the mechanisms in ``node/`` (control, dispatch, status,
logs, tracing, metrics, adaptivity, plugins, parsing, the compute hooks) and hands itself to
each. They see it as a ``Host``, not as ``Peer``: so none of them imports ``peer.py`` (which
imports all of them), and what a mechanism may touch of its peer is written down here.
A mechanism that needs one more thing of its own (``logs.py``: the run logs; ``parsing.py``:
the clients' parse slots) extends ``Host`` in its module; ``dispatch.py`` composes those.
``Peer`` satisfies every one of them structurally, which mypy checks where a peer is passed.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import trio

import satind.plugin as plugins
from satind.adaptivity.measure import AppBenchmarks
from satind.config import Config
from satind.core.effects import Effects
from satind.core.state import PeerState
from satind.engine.worker import Worker
from satind.membership.swim import Swim
from satind.membership.view import MemberTable
from satind.net import messages as m
from satind.net import tls
from satind.net.requests import Requests
from satind.net.transport import Address, Link
from satind.node.announce import TupleAnnouncer
from satind.node.checkpoint import Checkpointer, LogStore
from satind.node.compute import ComputeDriver
from satind.node.history import Recorder
from satind.node.thief import Thief
from satind.plugin.shipped import Cache
from satind.trace import Traces


def new_run_id() -> str:
    """A run id: sortable by start time, unique without coordination."""
    return time.strftime("%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(3)


@dataclass
class PeerOptions:
    name: str
    cluster: str = "c0"
    listen: Address = field(default_factory=lambda: Address("127.0.0.1", 0))
    # The address the members are given (ops/advertise.py); port 0: the bound port. None:
    # the bound address itself.
    advertise: Address | None = None
    # The machine's state directory, where the peer remembers the members it saw alive and
    # rejoins through them after a restart (node/remember.py); None: nothing remembered.
    state_dir: Path | None = None
    seeds: Sequence[Address] = ()
    credentials: tls.Credentials | None = None
    plugin_paths: Sequence[Path] = ()
    seed: int | None = None
    # The simulator fixes what is otherwise taken from the world: the process instance (start
    # time), the plugins (else discovered), and how run ids are made (else clock + random).
    instance: int | None = None
    plugins: dict[str, plugins.Plugin] | None = None
    run_ids: Callable[[], str] | None = None
    # The wall clock less the peer's clock (PeerState.wall_offset); None: time.time() less
    # trio's clock as the peer starts (the simulator's peers share its virtual clock: 0).
    wall_offset: float | None = None
    # Where checkpoint logs go; by default files in [checkpoint] dir (the simulator shares
    # one in-memory store among its peers, as machines share a mount).
    checkpoint_store: LogStore | None = None
    # `satind start --standby`: join, but take no work until admitted (node/adapt.py).
    standby: bool = False


class Host(Protocol):
    """A peer as its mechanisms see it (``node/peer.py``'s ``Peer``)."""

    # -- what it is -------------------------------------------------------------------------
    cfg: Config
    options: PeerOptions
    name: str  # "slot#instance" (net/names.py)
    # The protocol core's state: every decision reads and changes it through core handlers.
    state: PeerState

    # -- its parts --------------------------------------------------------------------------
    compute: ComputeDriver
    worker: Worker
    swim: Swim
    # The running drain's deadline (node/draining.py), None when not draining.
    drain_scope: trio.CancelScope | None
    thief: Thief
    requests: Requests
    checkpointer: Checkpointer
    # The machine's run history (node/history.py, node/recorder.py).
    recorder: Recorder
    announcer: TupleAnnouncer
    traces: Traces
    # Shipped code it was sent or fetched (plugin/shipped.py), made on first use.
    code_cache: Cache | None
    # Clients waiting for a run's result here, woken when it arrives.
    result_waiters: dict[str, list[trio.Event]]
    # Set once it joined the system (its seeds answered, or it is the first member).
    joined: trio.Event
    # Timings of runs' plugins' own benchmarks here (self-adaptivity, node/adapt.py).
    benchmarks: AppBenchmarks
    # (process CPU s, monotonic s, last share): status's CPU figure between two samples.
    _cpu: tuple[float, float, float]

    @property
    def table(self) -> MemberTable: ...

    def now(self) -> float: ...

    def others(self) -> list[str]: ...

    def machine(self) -> list[str]: ...

    def decisions(self) -> list[m.AdaptDecision]:
        """The last decisions of this peer's adaptivity coordinator (node/adapt.py)."""
        ...

    # -- what it does -----------------------------------------------------------------------
    def apply(self, effects: Effects) -> None:
        """Carry out the core's effects, in order."""
        ...

    def post(self, dest: str, msg: m.Message) -> bool: ...

    def spawn_task(self, fn: Any, *args: Any) -> None:
        """Run ``fn(*args)`` in the peer's nursery; an exception is logged, not raised."""
        ...

    def spawn_answer(self, link: Link, req: int, fn: Any, *args: Any) -> None:
        """Answer request ``req`` on ``link`` with what ``await fn(*args)`` returns."""
        ...

    def changed(self) -> None:
        """Something a waiting procedure may be waiting for changed."""
        ...

    async def wait_changed(self) -> None:
        """Return at the next ``changed``."""
        ...

    def leave(self) -> None: ...

    def drain(self, reason: str, leaving: Sequence[str] = (), deadline_s: float = -1.0) -> None: ...

    def reclaim(self, reclaimed: bool, reason: str) -> None: ...
