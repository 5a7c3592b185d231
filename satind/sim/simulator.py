"""Run a scenario: many real peers in one trio run, on virtual time, with faults.

Every peer is a real ``satind.node.peer.Peer`` — the same membership, gossip, stealing, run
and compute code as a deployed peer — on the in-memory network (``net/memory.py``), its
compute side driven in lockstep with virtual time (``sim/lockstep.py``: the synthetic tree's
leaves cost virtual seconds). A simulated client submits the workload
with the real protocol; the fault schedule crashes, drains, adds and partitions peers and
changes the drop rate; at the end the invariants are checked.

Determinism: trio runs on a virtual clock that jumps to the next deadline whenever every task is
blocked, and its scheduler is put in its deterministic mode with a seeded RNG (the switch trio
provides for Hypothesis); all randomness in satind comes from seeded ``random.Random``s. So a
scenario and a seed give one event history; ``trace_hash`` is a sha256 over every delivered
message (virtual time, sender, receiver, bytes) and every fault.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import math
import random
import struct
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import trio

from satind.config import apply_flags
from satind.engine.jobs import path_indices
from satind.membership.swim import suspicion_timeout
from satind.membership.view import State
from satind.net import codec
from satind.net import messages as m
from satind.net.memory import LinkFaults, MemoryLink, MemoryNetwork
from satind.net.names import peer_name
from satind.net.transport import Address, Identity
from satind.node.checkpoint import MemoryStore
from satind.node.peer import Peer, PeerOptions
from satind.plugin import Plugin, discover
from satind.sim.lockstep import LockstepCompute
from satind.sim.report import RunOutcome, SimReport, report
from satind.sim.scenario import Fault, Scenario
from satind.sim.workload import PLUGIN

CLIENT = "sim-client"
# Request numbers of the scenario's other runs' submissions: this plus their index (the
# workload's submission is 1, a resume 3).
RUNS_REQ = 1000
_NS = struct.Struct(">Q")

# Thresholds of CPython's cyclic garbage collector while a simulation runs. A simulation holds
# hundreds of thousands of long-lived objects (a thousand peers' member tables, tasks, queued
# jobs) and makes millions of short-lived ones (messages, cancel scopes). With the default
# (700, 10, 10) the survivors of young collections trigger a full collection every few hundred
# thousand objects: 49 of them, 24 of the 93 wall seconds of steady-1000.toml. Larger young
# generations let most short-lived objects die before they are examined, and almost nothing
# reaches the old generation. Cyclic garbage is still collected; nothing the simulation
# computes depends on when (the trace hash is the same).
SIM_GC_THRESHOLDS = (20_000, 20, 100)


class JumpingClock(trio.abc.Clock):
    """Virtual time that jumps to the next deadline whenever every task is blocked.

    What ``trio.testing.MockClock(autojump_threshold=0)`` does, in one pass of trio's loop
    instead of two: trio asks a clock how long to sleep only when no task can run, and this
    one then moves to that deadline at once (MockClock waits for an empty I/O poll first and
    jumps after it, and reads the real clock on every ``current_time``). Nothing in a
    simulation waits for real time or I/O, nor uses ``wait_all_tasks_blocked``.
    """

    def __init__(self) -> None:
        self._now = 0.0

    def start_clock(self) -> None:
        pass

    def current_time(self) -> float:
        return self._now

    def deadline_to_sleep_time(self, deadline: float) -> float:
        if deadline == math.inf:
            return 999_999_999.0  # nothing to wait for: a deadlock, as under MockClock
        self._now = max(self._now, deadline)
        return 0.0


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Run with ``SIM_GC_THRESHOLDS``; the previous thresholds come back afterwards."""
    previous = gc.get_threshold()
    gc.set_threshold(*SIM_GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*previous)


@contextlib.contextmanager
def deterministic_trio(seed: int) -> Iterator[None]:
    """Put trio's scheduler in its deterministic mode (the one it offers Hypothesis), seeded.

    This is the one place satind touches trio internals; if trio moves them, the simulator
    still runs but is no longer reproducible, and the reproducibility test says so.
    """
    core: Any = trio._core._run
    previous = core._ALLOW_DETERMINISTIC_SCHEDULING
    state = core._r.getstate()
    core._ALLOW_DETERMINISTIC_SCHEDULING = True
    core._r.seed(seed)
    try:
        yield
    finally:
        core._ALLOW_DETERMINISTIC_SCHEDULING = previous
        core._r.setstate(state)


class Simulation:
    """One scenario, one seed.

    Args:
        plugin: run this plugin with ``argv`` instead of the scenario's synthetic workload
            (the scenario has none), submitted at its ``submit_at``: how a test runs a real
            plugin through the scenario's faults. Its jobs cost virtual time only where they
            call ``lockstep.spend``; the report's ``result_ok`` is its check's verdict, made
            on the run's master as on a real run.
    """

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
        self.client: Any = None
        self.run_id = ""
        self._faults_done = trio.Event()
        self._faults_left = 0
        # One store for every peer, old and new: the shared checkpoint mount.
        self.store = MemoryStore("sim") if self.cfg.checkpoint.dir else None
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

    # -- peers -------------------------------------------------------------------------------

    def _address(self, name: str) -> Address:
        cluster, index = name.rsplit("/", 1)
        cluster_no = (
            sorted(self.scenario.clusters).index(cluster)
            if cluster in self.scenario.clusters
            else 250
        )
        return Address(f"10.{cluster_no}.{int(index) // 250}.{int(index) % 250 + 1}", 7420)

    def _new_name(self, cluster: str) -> str:
        index = self._next_index[cluster]
        self._next_index[cluster] += 1
        return f"{cluster}/{index}"

    def _provision(
        self, nursery: trio.Nursery, network: MemoryNetwork, cluster: str, count: int
    ) -> None:
        async def join() -> None:
            for _ in range(count):
                alive = self.live()
                seeds = [
                    self.peers[n].options.listen for n in self.rng.sample(alive, min(3, len(alive)))
                ]
                await self.start_peer(nursery, network, cluster, seeds)

        nursery.start_soon(join)

    async def start_peer(
        self,
        nursery: trio.Nursery,
        network: MemoryNetwork,
        cluster: str,
        seeds: list[Address],
        standby: bool = False,
        slot: str = "",
    ) -> Peer:
        """Start a peer: a new one in ``cluster``, or a new instance in ``slot`` (a restart:
        same address, a newer instance)."""
        slot = slot or self._new_name(cluster)
        instance = len(self.peers) + 1
        name = peer_name(slot, instance)
        self.slots[slot] = name
        options = PeerOptions(
            name=slot,
            cluster=cluster,
            listen=self._address(slot),
            seeds=seeds,
            seed=self.rng.getrandbits(64),
            instance=instance,
            plugins={
                PLUGIN.name: PLUGIN,
                **self.run_plugins,
                **({} if self.plugin is None else {self.plugin.name: self.plugin}),
            },
            run_ids=lambda: next(self._run_ids),
            checkpoint_store=self.store,
            standby=standby,
        )

        def compute(hooks: Any) -> LockstepCompute:
            driver = LockstepCompute(
                self.cfg.engine,
                hooks,
                functools.partial(self._on_leaf, name),
                max_frame=self.cfg.net.max_frame_bytes,
                value_depth=self.cfg.net.max_depth,
            )
            driver.speed = self.scenario.speeds.get(cluster, 1.0)
            self.workers[name] = driver
            return driver

        peer = Peer(self.cfg, options, transport=network.attach, compute=compute)
        assert peer.name == name
        self.peers[name] = peer
        # [adapt] provision_command in the simulator: new peers join the coordinator's cluster
        # (a real one runs the command; here nothing outside the simulation may run).
        peer.coordinator.provision = functools.partial(self._provision, nursery, network, cluster)
        scope = trio.CancelScope()
        self.scopes[name] = scope

        async def run() -> None:
            with scope:
                await peer.run()
            if not scope.cancelled_caught:
                self.gone.add(name)  # it stopped by itself: drained and left
                self.left_at[name] = trio.current_time()
                if name == self.master and self.client is not None:
                    self._follow(self.client)

        nursery.start_soon(run)
        return peer

    def _follow(self, client: Any) -> None:
        """As a real client does when the master it waits on is gone (crashed, or drained and
        left): ask a survivor to wait for the result (it relays to the run's new master)."""
        if self.run_id and self.result is None and self.live():
            survivor = sorted(self.live())[0]
            client.post(survivor, m.ResultRequest(2, self.run_id, True))

    def live(self) -> list[str]:
        return [n for n in self.peers if n not in self.gone]

    def named(self, names: Sequence[str]) -> list[str]:
        """The peers a scenario names: by slot (c1/2, the newest instance in it) or by member
        name."""
        return [self.slots.get(n, n) for n in names]

    # -- faults ------------------------------------------------------------------------------

    async def _fault(
        self, fault: Fault, nursery: trio.Nursery, network: MemoryNetwork, client: Any
    ) -> None:
        try:
            await self._apply(fault, nursery, network, client)
        finally:
            self._faults_left -= 1
            if self._faults_left == 0:
                self._faults_done.set()

    async def _apply(
        self, fault: Fault, nursery: trio.Nursery, network: MemoryNetwork, client: Any
    ) -> None:
        await trio.sleep_until(fault.at)
        self.last_change = trio.current_time()
        self.trace("fault", repr(fault).encode())
        if fault.kind in ("crash", "crash_all"):
            names = self.named(fault.peers) + [
                n
                for n in self.live()
                if n.rsplit("/", 1)[0] in fault.clusters or fault.kind == "crash_all"
            ]
            for name in names:
                if name in self.peers and name not in self.gone:
                    network.detach(name)
                    self.scopes[name].cancel()
                    self.gone.add(name)
            if self.master in names:
                self._follow(client)
        elif fault.kind == "restart":
            names = [n for n in self.named(fault.peers) if n in self.peers and n not in self.gone]
            for name in names:
                network.detach(name)
                self.scopes[name].cancel()
                self.gone.add(name)
            if self.master in names:
                self._follow(client)
            await trio.sleep(fault.duration)
            self.last_change = trio.current_time()
            for name in names:
                old = self.peers[name]
                alive = self.live()
                seeds = [
                    self.peers[n].options.listen for n in self.rng.sample(alive, min(3, len(alive)))
                ]
                await self.start_peer(
                    nursery, network, old.options.cluster, seeds, slot=old.options.name
                )
                self.trace("restart", name.encode())
        elif fault.kind == "drain":
            for name in self.named(fault.peers):
                self.drained.add(name)
                client.post(name, m.DrainRequest(0, [name]))
        elif fault.kind == "join":
            alive = self.live()
            for _ in range(fault.count):
                seeds = [
                    self.peers[n].options.listen for n in self.rng.sample(alive, min(3, len(alive)))
                ]
                peer = await self.start_peer(nursery, network, fault.cluster, seeds)
                alive = alive or [peer.name]  # after a total loss the first joiner is the seed
        elif fault.kind == "damage_logs":
            self._damage_logs(fault.count)
        elif fault.kind == "resume":
            await self._resume(client)
        elif fault.kind == "drop":
            network.faults.drop = fault.value
        elif fault.kind == "load":
            # The peers there now; a peer that joins later starts unloaded.
            names = self.named(fault.peers) + [
                n for n in self.live() if n.rsplit("/", 1)[0] in fault.clusters
            ]
            for name in names:
                if name in self.workers and name not in self.gone:
                    self.workers[name].share = fault.value
        elif fault.kind == "bandwidth":
            network.set_uplink(fault.cluster, None if fault.value == math.inf else fault.value)
        elif fault.kind == "pause":
            paused = [n for n in self.named(fault.peers) if n in self.peers and n not in self.gone]
            for name in paused:
                network.hold(name)
                self.workers[name].freeze()
            await trio.sleep(fault.duration)
            for name in paused:
                self.workers[name].thaw()
                network.release(name)
            self.last_change = trio.current_time()
            self.trace("resume-peers", ",".join(fault.peers).encode())
        elif fault.kind == "partition":
            sides = [self._expand(side) for side in fault.sides]
            network.partition(sides[0], sides[1])
            await trio.sleep(fault.duration)
            network.heal()
            self.last_change = trio.current_time()
            self.trace("heal", b"")

    def _damage_logs(self, flips: int) -> None:
        """Cut every log at a random offset in its second half, then flip random bits: what a
        crash during a write and a bad disk do. A resume must still be exact."""
        if self.store is None:
            return
        for name in sorted(self.store.logs):
            log_data = self.store.logs[name]
            if not log_data:
                continue
            del log_data[self.rng.randrange(len(log_data) // 2, len(log_data) + 1) :]
            for _ in range(flips if log_data else 0):
                log_data[self.rng.randrange(len(log_data))] ^= 1 << self.rng.randrange(8)

    async def _resume(self, client: Any) -> None:
        """Ask the first live peer to resume the run from the checkpoints (`satind resume`)."""
        live = sorted(self.live())
        if not live or not self.run_id or self.store is None:
            return
        contents = await self.store.load()
        results = contents.results.get(self.run_id, {})
        self.results_checkpointed = len(results)
        self.leaves_before = {leaf for (run, leaf) in self.leaves if run == self.run_id}
        for path in results:
            prefix = tuple(path_indices(path))
            self.checkpointed_leaves |= {
                leaf
                for (run, leaf) in self.leaves
                if run == self.run_id and leaf[: len(prefix)] == prefix
            }
        self.resumed_at = trio.current_time()
        self.master = live[0]
        self.trace("resume", self.master.encode())
        client.post(self.master, m.ResumeRequest(3, self.run_id))

    def _expand(self, side: tuple[str, ...]) -> set[str]:
        out = set()
        for item in side:
            if item in self.scenario.clusters:
                out |= {n for n in self.peers if n.rsplit("/", 1)[0] == item}
            else:
                out.add(self.slots.get(item, item))
        return out

    # -- the run -----------------------------------------------------------------------------

    async def main(self) -> None:
        sc = self.scenario
        faults = LinkFaults(
            latency_s=sc.latency_s,
            wide_latency_s=sc.wide_latency_s,
            jitter_s=sc.jitter_s,
            drop=sc.drop,
            duplicate=sc.duplicate,
        )
        network = MemoryNetwork(random.Random(self.rng.getrandbits(64)), faults)
        network.on_deliver = self._on_deliver
        async with trio.open_nursery() as nursery:
            await nursery.start(network.run)
            first: Address | None = None
            converged = sc.bootstrap == "converged"
            for cluster in sorted(sc.clusters):
                working = sc.clusters[cluster] - sc.standby.get(cluster, 0)
                for i in range(sc.clusters[cluster]):
                    seeds = [] if first is None or converged else [first]
                    peer = await self.start_peer(
                        nursery, network, cluster, seeds, standby=i >= working
                    )
                    first = first or peer.options.listen
            if converged:
                everyone = [p.table.me for p in self.peers.values()]
                for peer in self.peers.values():
                    peer.table.add_known(everyone)
            client = network.attach(
                Identity(CLIENT, "", "client"), Address("10.255.255.1", 1), self._client_message
            )
            self.client = client
            self._faults_left = len(sc.faults)
            if not sc.faults:
                self._faults_done.set()
            for fault in sc.faults:
                nursery.start_soon(self._fault, fault, nursery, network, client)
            nursery.start_soon(self._watch_convergence)
            if sc.workload is not None or self.plugin is not None:
                nursery.start_soon(self._submit, client)
            for index in range(len(self.runs)):
                nursery.start_soon(self._submit_run, client, index)
            with trio.move_on_at(sc.duration_s):
                await self._done.wait()
                await self._faults_done.wait()
                # The end of the run spreads; from then on nobody should look for work.
                await trio.sleep(1.0)
                self.idle_from = trio.current_time()
                self.attempts_at_idle = self.steal_attempts()
                # Let membership settle after the last change before judging agreement: long
                # enough to detect a crash (a few probes plus the longest suspicion).
                n = max(2, len(self.live()))
                # Without membership faults, a few probe rounds let the end of the run spread.
                settle = self.cfg.membership.probe_interval_s * (
                    8
                    + self.cfg.membership.suspicion_max_mult
                    * suspicion_timeout(self.cfg.membership.suspicion_mult, n, 1.0)
                    if sc.faults
                    else 5
                )
                if sc.faults and (sc.drop > 0 or any(f.kind == "drop" for f in sc.faults)):
                    # Under loss a live member can be declared dead and its refutation lost
                    # on the way to some peers; what heals that is the anti-entropy of the
                    # periodic push-pull, so agreement is judged after one such period.
                    settle += self.cfg.membership.push_pull_interval_s
                # A fault or a result may move last_change while we sleep: check again.
                while trio.current_time() < self.last_change + settle:  # noqa: ASYNC110
                    await trio.sleep_until(self.last_change + settle)
            self.end = trio.current_time()
            self.network = network
            nursery.cancel_scope.cancel()

    async def _submit(self, client: Any) -> None:
        await trio.sleep_until(self.scenario.submit_at)
        master = sorted(self.live())[0]
        if self.plugin is not None:
            self.submitted_at = trio.current_time()
            self.master = master
            self.trace("submit", master.encode())
            plugin = self.plugin
            client.post(master, m.Submit(1, plugin.name, self.argv, plugin.code_hash))
            return
        w = self.scenario.workload
        assert w is not None
        argv = [str(w.depth), str(w.branching), repr(w.leaf_ms), w.dist, repr(w.imbalance)]
        if w.needles > 0 or w.steps > 0:
            argv.append(repr(w.needles))
        if w.steps > 0:
            argv.append(str(w.steps))
            if w.tail_ms > 0:
                argv.append(repr(w.tail_ms))
        self.submitted_at = trio.current_time()
        self.master = master
        self.trace("submit", master.encode())
        client.post(master, m.Submit(1, PLUGIN.name, argv, PLUGIN.code_hash))

    async def _submit_run(self, client: Any, index: int) -> None:
        """One of the scenario's other runs, to the master it names."""
        outcome = self.runs[index]
        spec = outcome.spec
        await trio.sleep_until(spec.at)
        outcome.submitted_at = trio.current_time()
        [to] = self.named([spec.to])
        if to not in self.live():
            outcome.error = f"{spec.to} is not a live peer at {spec.at:g} s"
            self._check_done()
            return
        plugin = self.run_plugins[spec.plugin]
        self.trace("submit", f"{spec.plugin}>{to}".encode())
        client.post(to, m.Submit(RUNS_REQ + index, spec.plugin, list(spec.argv), plugin.code_hash))

    def _run_message(self, msg: m.Message) -> bool:
        """A reply about one of the scenario's other runs (True), or not one."""
        if isinstance(msg, m.Submitted) and msg.req >= RUNS_REQ:
            outcome = self.runs[msg.req - RUNS_REQ]
            if msg.error is not None:
                outcome.error = f"refused: {msg.error.type}: {msg.error.message}"
                self._check_done()
            else:
                outcome.run_id = msg.run_id
            return True
        if isinstance(msg, m.RunResult):
            for outcome in self.runs:
                if outcome.run_id == msg.run_id and outcome.result is None:
                    outcome.result = msg
                    outcome.ended_at = trio.current_time()
                    self.last_change = max(self.last_change, outcome.ended_at)
                    self.trace("result", codec.encode_message(msg))
                    self._check_done()
                    return True
        return False

    def _check_done(self) -> None:
        """The workload's run (if any) and every other run have ended."""
        workload_done = self.scenario.workload is None or self.result is not None
        if workload_done and all(o.over for o in self.runs):
            self._done.set()

    def _client_message(self, link: MemoryLink, msg: m.Message) -> None:
        if self.runs and self._run_message(msg):
            return
        if isinstance(msg, m.Submitted):
            if msg.error is not None:
                self.submit_error = f"{msg.error.type}: {msg.error.message}"
            else:
                self.run_id = msg.run_id
        if isinstance(msg, m.ResultReply) and msg.result is not None and self.result is None:
            msg = msg.result  # the result, relayed by a survivor after the master was lost
        if isinstance(msg, m.RunResult) and self.result is None:
            self.result = msg
            self.result_at = trio.current_time()
            self.last_change = max(self.last_change, self.result_at)
            self.trace("result", codec.encode_message(msg))
            self._check_done()

    async def _watch_convergence(self) -> None:
        """The first time every live peer sees exactly the live peers."""
        while True:
            await trio.sleep(0.25)
            if self._agreed():
                self.converged_at = trio.current_time()
                if self.scenario.workload is None and not self.runs and self.plugin is None:
                    self._done.set()
                return

    def steal_attempts(self) -> int:
        return sum(
            p.state.steal.steal_attempts_local + p.state.steal.steal_attempts_wide
            for p in self.peers.values()
        )

    def _agreed(self) -> bool:
        live = self.live()
        count = len(live)
        for name in live:
            if self.peers[name].table.alive_count != count:
                return False
        expected_set = sorted(live)
        return all([mem.name for mem in self.peers[n].table.alive()] == expected_set for n in live)

    # -- the verdict -------------------------------------------------------------------------

    def run(self) -> SimReport:
        wall = time.perf_counter()
        with deterministic_trio(self.seed), fewer_collections():
            trio.run(self.main, clock=JumpingClock())
        return report(self, time.perf_counter() - wall)


def simulate(scenario: Scenario, seed: int | None = None) -> SimReport:
    """Run one scenario; the report says what happened and whether every invariant held."""
    return Simulation(scenario, seed).run()


__all__ = ["SimReport", "Simulation", "State", "simulate"]
