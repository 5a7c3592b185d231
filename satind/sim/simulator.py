"""Run a scenario: many real peers in one trio run, on virtual time, with faults.

Every peer is a real ``satind.node.peer.Peer`` — the same membership, gossip, stealing, run
and compute code as a deployed peer — on the in-memory network (``net/memory.py``), its
compute side driven in lockstep with virtual time (``sim/lockstep.py``: the synthetic tree's
leaves cost virtual seconds). A simulated client submits the workload
with the real protocol; the fault schedule crashes, drains, adds and partitions peers and
changes the drop rate; at the end the invariants are checked.

Determinism: trio runs on a MockClock that jumps to the next deadline whenever every task is
blocked, and its scheduler is put in its deterministic mode with a seeded RNG (the switch trio
provides for Hypothesis); all randomness in satind comes from seeded ``random.Random``s. So a
scenario and a seed give one event history; ``trace_hash`` is a sha256 over every delivered
message (virtual time, sender, receiver, bytes) and every fault.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import random
import struct
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import trio
import trio.testing

from satind.engine.jobs import path_indices
from satind.membership.swim import suspicion_timeout
from satind.membership.view import State
from satind.net import codec
from satind.net import messages as m
from satind.net.memory import LinkFaults, MemoryLink, MemoryNetwork
from satind.net.transport import Address, Identity
from satind.node.peer import Peer, PeerOptions
from satind.recovery.checkpoint import MemoryStore
from satind.sim.lockstep import LockstepCompute
from satind.sim.scenario import Fault, Scenario
from satind.sim.workload import PLUGIN, walk

CLIENT = "sim-client"


@dataclass
class SimReport:
    scenario: str
    seed: int
    peers: int
    makespan_s: float | None
    result_ok: bool
    work_s: float
    redone_s: float
    leaves_run: int
    leaves_unique: int
    leaves_expected: int
    steal_attempts_local: int
    steal_attempts_wide: int
    stolen_local: int
    stolen_wide: int
    messages: int
    bytes: int
    messages_dropped: int
    jobs_restarted: int
    tuples_sent: int
    tuples_received: int
    results_reused: int
    # Gossip messages that carried orphan tuples (combined: many tuples per message).
    tuple_messages: int
    # Leaves a peer finished before it drained that some peer ran again afterwards: a drained
    # peer hands everything over, so this stays 0 unless a later fault lost the results.
    drained_redone: int
    # After a total loss and a resume (faults crash_all, resume): leaves whose result the
    # checkpoint logs covered when the resume loaded them, and how many of those ran again.
    leaves_checkpointed: int
    checkpointed_redone: int
    leaves_after_resume: int
    checkpoint_bytes: int
    # Results the resume loaded from the logs (after compaction), and the leaf work done
    # before the loss that was done again after it.
    results_checkpointed: int
    work_before_loss_s: float
    work_lost_s: float
    # The run's own statistics (its result's stats): spawns it counted, and the tree's.
    result_spawns: int
    spawns_expected: int
    # Steal requests sent from one second after the result to the end (an idle system must
    # be quiet), and how long that window was.
    steal_attempts_idle: int
    idle_s: float
    convergence_s: float | None
    virtual_s: float
    wall_s: float
    trace_events: int
    trace_hash: str
    invariants_ok: bool
    violations: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


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
    def __init__(self, scenario: Scenario, seed: int | None = None) -> None:
        self.scenario = scenario
        self.seed = scenario.seed if seed is None else seed
        self.rng = random.Random(self.seed)
        self.cfg = dataclasses.replace(
            scenario.config,
            steal=dataclasses.replace(scenario.config.steal, algorithm=scenario.steal),  # type: ignore[arg-type]
        )
        self.peers: dict[str, Peer] = {}
        self.scopes: dict[str, trio.CancelScope] = {}
        self.workers: dict[str, LockstepCompute] = {}
        self.gone: set[str] = set()  # crashed or left: not expected in anyone's view
        self.hash = hashlib.sha256()
        self.events = 0
        self.leaves: Counter[tuple[str, tuple[int, ...]]] = Counter()
        self.leaf_cost: dict[tuple[str, tuple[int, ...]], float] = {}
        # Who ran each leaf, in order: for drained_redone.
        self.leaf_runners: dict[tuple[str, tuple[int, ...]], list[str]] = {}
        self.drained: set[str] = set()
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

    # -- tracing -----------------------------------------------------------------------------

    def trace(self, kind: str, detail: bytes) -> None:
        now_ns = round(trio.current_time() * 1e9)
        self.hash.update(struct.pack(">Q", now_ns) + kind.encode() + b"\x00" + detail)
        self.events += 1

    def _on_deliver(self, src: str, dst: str, data: bytes) -> None:
        self.trace("msg", f"{src}>{dst}".encode() + b"\x00" + data)

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

    async def start_peer(
        self, nursery: trio.Nursery, network: MemoryNetwork, cluster: str, seeds: list[Address]
    ) -> Peer:
        name = self._new_name(cluster)
        options = PeerOptions(
            name=name,
            cluster=cluster,
            listen=self._address(name),
            seeds=seeds,
            seed=self.rng.getrandbits(64),
            instance=len(self.peers) + 1,
            plugins={PLUGIN.name: PLUGIN},
            run_ids=lambda: next(self._run_ids),
            checkpoint_store=self.store,
        )

        def compute(hooks: Any) -> LockstepCompute:
            driver = LockstepCompute(
                self.cfg.engine,
                hooks,
                functools.partial(self._on_leaf, name),
                max_frame=self.cfg.net.max_frame_bytes,
                value_depth=self.cfg.net.max_depth,
            )
            self.workers[name] = driver
            return driver

        peer = Peer(self.cfg, options, transport=network.attach, compute=compute)
        self.peers[name] = peer
        scope = trio.CancelScope()
        self.scopes[name] = scope

        async def run() -> None:
            with scope:
                await peer.run()
            if not scope.cancelled_caught:
                self.gone.add(name)  # it stopped by itself: drained and left

        nursery.start_soon(run)
        return peer

    def live(self) -> list[str]:
        return [n for n in self.peers if n not in self.gone]

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
            names = list(fault.peers) + [
                n
                for n in self.live()
                if n.rsplit("/", 1)[0] in fault.clusters or fault.kind == "crash_all"
            ]
            for name in names:
                if name in self.peers and name not in self.gone:
                    network.detach(name)
                    self.scopes[name].cancel()
                    self.gone.add(name)
            if self.master in names and self.run_id and self.result is None and self.live():
                # As a real client does: the master is gone, ask a survivor to wait for the
                # result (it relays to whoever is elected).
                survivor = sorted(self.live())[0]
                client.post(survivor, m.ResultRequest(2, self.run_id, True))
        elif fault.kind == "drain":
            for name in fault.peers:
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
        elif fault.kind == "pause":
            paused = [n for n in fault.peers if n in self.peers and n not in self.gone]
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
                out.add(item)
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
                for _ in range(sc.clusters[cluster]):
                    seeds = [] if first is None or converged else [first]
                    peer = await self.start_peer(nursery, network, cluster, seeds)
                    first = first or peer.options.listen
            if converged:
                everyone = [p.table.me for p in self.peers.values()]
                for peer in self.peers.values():
                    peer.table.add_known(everyone)
            client = network.attach(
                Identity(CLIENT, "", "client"), Address("10.255.255.1", 1), self._client_message
            )
            self._faults_left = len(sc.faults)
            if not sc.faults:
                self._faults_done.set()
            for fault in sc.faults:
                nursery.start_soon(self._fault, fault, nursery, network, client)
            nursery.start_soon(self._watch_convergence)
            if sc.workload is not None:
                nursery.start_soon(self._submit, client)
            with trio.move_on_at(sc.duration_s):
                await self._done.wait()
                await self._faults_done.wait()
                # The end of the run spreads; from then on nobody should look for work.
                await trio.sleep(1.0)
                self.idle_from = trio.current_time()
                self.attempts_at_idle = self._steal_attempts()
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
                # A fault or a result may move last_change while we sleep: check again.
                while trio.current_time() < self.last_change + settle:  # noqa: ASYNC110
                    await trio.sleep_until(self.last_change + settle)
            self.end = trio.current_time()
            self.network = network
            nursery.cancel_scope.cancel()

    async def _submit(self, client: Any) -> None:
        assert self.scenario.workload is not None
        await trio.sleep_until(self.scenario.submit_at)
        w = self.scenario.workload
        master = sorted(self.live())[0]
        argv = [str(w.depth), str(w.branching), repr(w.leaf_ms), w.dist, repr(w.imbalance)]
        self.submitted_at = trio.current_time()
        self.master = master
        self.trace("submit", master.encode())
        client.post(master, m.Submit(1, PLUGIN.name, argv, PLUGIN.code_hash))

    def _client_message(self, link: MemoryLink, msg: m.Message) -> None:
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
            self._done.set()

    async def _watch_convergence(self) -> None:
        """The first time every live peer sees exactly the live peers."""
        while True:
            await trio.sleep(0.25)
            if self._agreed():
                self.converged_at = trio.current_time()
                if self.scenario.workload is None:
                    self._done.set()
                return

    def _steal_attempts(self) -> int:
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
        with deterministic_trio(self.seed):
            trio.run(self.main, clock=trio.testing.MockClock(autojump_threshold=0))
        return self.report(time.perf_counter() - wall)

    def report(self, wall_s: float) -> SimReport:
        violations: list[str] = []
        sc = self.scenario
        result_ok = True
        leaves_expected = spawns_expected = 0
        if sc.workload is not None:
            answer, leaves_expected, _, spawns_expected = walk(sc.workload)
            if self.submit_error:
                violations.append(f"a submit or resume was refused: {self.submit_error}")
            if self.result is None:
                result_ok = False
                violations.append(f"the run did not finish within {sc.duration_s:g} virtual s")
            elif self.result.error is not None:
                result_ok = False
                violations.append(
                    f"the run failed: {self.result.error.type}: {self.result.error.message}"
                )
            else:
                assert self.result.value is not None
                got = codec.decode_value(self.result.value)
                if got != answer:
                    result_ok = False
                    violations.append(
                        f"wrong result {got}, expected {answer} (a lost or doubly applied leaf)"
                    )
            unique = {path for (_, path) in self.leaves}
            if (
                self.result is not None
                and self.result.error is None
                and len(unique) != leaves_expected
            ):
                violations.append(
                    f"{len(unique)} distinct leaves ran, the tree has {leaves_expected}"
                )
        live = sorted(self.live())
        for name in live:
            view = [mem.name for mem in self.peers[name].table.alive()]
            if view != live:
                missing = sorted(set(live) - set(view))
                extra = sorted(set(view) - set(live))
                violations.append(
                    f"{name} disagrees on membership: missing {missing}, extra {extra}"
                )
                break
        for name in live:
            peer = self.peers[name]
            worker = self.workers[name].worker
            left = len(peer.worker.queue)
            if (
                left
                or worker.nesting
                or peer.custody.given
                or any(r.info.master for r in peer.runs.active.values())
            ):
                violations.append(
                    f"{name} still has work at the end: queue {left}, running {worker.nesting}, "
                    f"stolen out {len(peer.custody.given)}, active runs {len(peer.runs.active)}"
                )
        counters = [p.state.steal for p in self.peers.values()]
        traffic = [p.transport.counters for p in self.peers.values()]
        redone = sum((count - 1) * self.leaf_cost[key] for key, count in self.leaves.items())
        return SimReport(
            scenario=sc.name,
            seed=self.seed,
            peers=len(self.peers),
            makespan_s=None
            if self.result_at is None
            else round(self.result_at - self.submitted_at, 6),
            result_ok=result_ok,
            work_s=round(self.work_s, 6),
            redone_s=round(redone, 6),
            leaves_run=sum(self.leaves.values()),
            leaves_unique=len(self.leaves),
            leaves_expected=leaves_expected,
            steal_attempts_local=sum(c.steal_attempts_local for c in counters),
            steal_attempts_wide=sum(c.steal_attempts_wide for c in counters),
            stolen_local=sum(c.stolen_local for c in counters),
            stolen_wide=sum(c.stolen_wide for c in counters),
            messages=sum(t.messages for t in traffic),
            bytes=sum(t.bytes for t in traffic),
            messages_dropped=self.network.dropped,
            jobs_restarted=sum(c.jobs_restarted for c in counters),
            tuples_sent=sum(p.orphans.counters.tuples_sent for p in self.peers.values()),
            tuples_received=sum(p.orphans.counters.tuples_received for p in self.peers.values()),
            results_reused=sum(p.orphans.counters.results_reused for p in self.peers.values()),
            tuple_messages=sum(p.swim.dissemination.tuple_messages for p in self.peers.values()),
            drained_redone=sum(
                1
                for runners in self.leaf_runners.values()
                if any(r in self.drained for r in runners[:-1])
            ),
            leaves_checkpointed=len(self.checkpointed_leaves),
            checkpointed_redone=sum(
                1 for leaf in self.checkpointed_leaves if self.leaves_after[leaf]
            ),
            leaves_after_resume=sum(self.leaves_after.values()),
            checkpoint_bytes=sum(p.checkpointer.bytes_written for p in self.peers.values()),
            results_checkpointed=self.results_checkpointed,
            work_before_loss_s=round(
                sum(self.leaf_cost[(self.run_id, leaf)] for leaf in self.leaves_before), 6
            ),
            work_lost_s=round(
                sum(
                    self.leaf_cost[(self.run_id, leaf)]
                    for leaf in self.leaves_before
                    if self.leaves_after[leaf]
                ),
                6,
            ),
            result_spawns=int(self.result.stats.get("spawns", 0)) if self.result else 0,
            spawns_expected=spawns_expected,
            steal_attempts_idle=self._steal_attempts() - self.attempts_at_idle
            if self.idle_from is not None
            else 0,
            idle_s=round(self.end - self.idle_from, 6) if self.idle_from is not None else 0.0,
            convergence_s=self.converged_at,
            virtual_s=round(self.end, 6),
            wall_s=round(wall_s, 3),
            trace_events=self.events,
            trace_hash=self.hash.hexdigest(),
            invariants_ok=not violations,
            violations=violations,
        )


def simulate(scenario: Scenario, seed: int | None = None) -> SimReport:
    """Run one scenario; the report says what happened and whether every invariant held."""
    return Simulation(scenario, seed).run()


__all__ = ["SimReport", "Simulation", "State", "simulate"]
