"""What a simulation holds and records: its peers, the trace hash, every leaf run.

``trace_hash`` is a sha256 over every delivered message (virtual time, sender, receiver,
bytes) and every fault; the leaf accounting (who ran which leaf, at what cost, before and after
a resume) is what the report's work-done and work-redone figures are made of
(``sim/report.py``).
"""

from __future__ import annotations

import hashlib
import random
import struct
from collections import Counter
from collections.abc import Sequence
from typing import Any

import trio

from satind.config import apply_flags
from satind.net import messages as m
from satind.node.checkpoint import MemoryStore
from satind.node.peer import Peer
from satind.plugin import Plugin, discover
from satind.sim.lockstep import LockstepCompute
from satind.sim.report import RunOutcome
from satind.sim.scenario import Scenario

_NS = struct.Struct(">Q")


class SimState:
    """The state every part of a simulation shares (``Simulation`` in ``sim/simulator.py``
    puts the parts together): the scenario, the peers and what became of them, the run, the
    trace and the leaf accounting."""

    def __init__(
        self,
        scenario: Scenario,
        seed: int | None = None,
        *,
        plugin: Plugin | None = None,
        argv: Sequence[str] = (),
    ) -> None:
        if plugin is not None and scenario.workload is not None:
            raise ValueError(
                f"scenario {scenario.name!r} has a workload: a plugin run replaces it, give a "
                "scenario without [workload]"
            )
        self.scenario = scenario
        self.seed = scenario.seed if seed is None else seed
        self.plugin = plugin
        self.argv = list(argv)
        self.rng = random.Random(self.seed)
        self.cfg = apply_flags(scenario.config, {"steal": {"algorithm": scenario.steal}})
        self.peers: dict[str, Peer] = {}
        self.scopes: dict[str, trio.CancelScope] = {}
        self.workers: dict[str, LockstepCompute] = {}
        self.gone: set[str] = set()  # crashed or left: not expected in anyone's view
        # Peers are keyed by member name (slot and instance, membership/view.py); a
        # scenario names slots (c1/2): the newest instance started in each.
        self.slots: dict[str, str] = {}
        self.hash = hashlib.sha256()
        self.events = 0
        self.leaves: Counter[tuple[str, tuple[int, ...]]] = Counter()
        self.leaf_cost: dict[tuple[str, tuple[int, ...]], float] = {}
        # Who ran each leaf, in order: for drained_redone.
        self.leaf_runners: dict[tuple[str, tuple[int, ...]], list[str]] = {}
        self.drained: set[str] = set()
        self.left_at: dict[str, float] = {}  # when each drained peer left
        self.work_s = 0.0
        self.result: m.RunResult | None = None
        self.submitted_at = 0.0
        self.result_at: float | None = None
        self.converged_at: float | None = None
        self.last_change = 0.0
        self._run_ids = (f"sim-{self.seed}-{i}" for i in range(1_000_000))
        self._next_index: Counter[str] = Counter()
        self._done = trio.Event()
        self.master = ""
        # The peer the client waits on for the result: the master, until it is gone.
        self.waiting_on = ""
        self.client: Any = None
        self.run_id = ""
        self._faults_done = trio.Event()
        self._faults_left = 0
        # One store for every peer, old and new: the shared checkpoint mount; or, with
        # checkpoint.dir = "local", one per slot (a machine's own disk, kept across restarts;
        # a resume then finds no shared mount to read).
        self.local_logs = self.cfg.checkpoint.dir == "local"
        self.store = MemoryStore("sim") if self.cfg.checkpoint.dir and not self.local_logs else None
        self.stores: dict[str, MemoryStore] = {}
        self.resumed_at: float | None = None
        self.checkpointed_leaves: set[tuple[int, ...]] = set()
        self.leaves_after: Counter[tuple[int, ...]] = Counter()
        self.leaves_before: set[tuple[int, ...]] = set()
        self.results_checkpointed = 0
        self.submit_error = ""
        self.idle_from: float | None = None
        self.attempts_at_idle = 0
        # The scenario's other runs ([[runs]]), by their index there: the plugins they name
        # (every peer has them), and what became of each (see ``RunOutcome``).
        known = discover() if scenario.runs else {}
        self.run_plugins = {spec.plugin: known[spec.plugin] for spec in scenario.runs}
        self.runs = [RunOutcome(spec) for spec in scenario.runs]

    # -- tracing -----------------------------------------------------------------------------

    def trace(self, kind: str, detail: bytes) -> None:
        now_ns = round(trio.current_time() * 1e9)
        self.hash.update(struct.pack(">Q", now_ns) + kind.encode() + b"\x00" + detail)
        self.events += 1

    def _on_deliver(self, src: str, dst: str, data: bytes) -> None:
        # trace("msg", ...) with the parts hashed one after another (the same digest as
        # hashing them joined), not copied into one string first: it runs for every message.
        update = self.hash.update
        update(_NS.pack(round(trio.current_time() * 1e9)))
        update(f"msg\x00{src}>{dst}\x00".encode())
        update(data)
        self.events += 1

    def _on_leaf(self, peer: str, run_id: str, path: tuple[int, ...], cost: float) -> None:
        self.leaves[(run_id, path)] += 1
        self.leaf_runners.setdefault((run_id, path), []).append(peer)
        self.leaf_cost[(run_id, path)] = cost
        self.work_s += cost
        if self.resumed_at is not None:
            self.leaves_after[path] += 1

    # -- the live peers, the peers a scenario names, following a lost master -----------------

    def _follow(self, client: Any) -> None:
        """As a real client does when the peer it waits on is gone (crashed, or drained and
        left): ask a survivor to wait for the result (it relays to the run's new master), one
        that is not draining if there is one, and follow it in turn if it goes too (a whole
        cluster drained at once: the first live peer may be leaving with the master)."""
        live = sorted(self.live())
        if self.run_id and self.result is None and live:
            staying = [n for n in live if n not in self.drained]
            self.waiting_on = (staying or live)[0]
            client.post(self.waiting_on, m.ResultRequest(2, self.run_id, True))

    def waits_on(self, names: Sequence[str]) -> bool:
        """Whether the client waits for the result on one of ``names``."""
        return any(n and n in names for n in (self.master, self.waiting_on))

    def live(self) -> list[str]:
        return [n for n in self.peers if n not in self.gone]

    def named(self, names: Sequence[str]) -> list[str]:
        """The peers a scenario names: by slot (c1/2, the newest instance in it) or by member
        name."""
        return [self.slots.get(n, n) for n in names]
