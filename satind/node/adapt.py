"""Self-adaptivity on a peer (satin-grid-programming-model §4.5): answering the coordinator,
and being it.

Every peer answers a ``LoadRequest`` with what it measured (adaptivity/measure.py). The
coordinator is not a fixed machine: it is the master of the oldest run in progress, so it is
elected as a run's master is, and when that master is lost or drained, the run's new master
coordinates from its next period on. With ``[adapt] enabled`` each period it samples every
member, decides (adaptivity/coordinator.py) and acts:

- drain a peer, or every peer of a cluster: a ``Drain`` to each (core/drain.py: it
  finishes or hands over its work and leaves);
- more peers: first standby peers (``satind start --standby``: members that take no work until
  admitted) get a ``Reclaim(False)``, as ``satind release`` would send; for the rest it runs
  ``[adapt] provision_command`` with the number wanted (a batch system's submit, a cloud
  script), one at a time. The simulator provides its own (it starts peers).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import trio

from satind.adaptivity.coordinator import Decision, Sample, confirm, decide, periods
from satind.core.effects import Link, Reply
from satind.net import messages as m
from satind.net.names import slot_of
from satind.node.host import Host
from satind.node.rpc import ask_all

log = logging.getLogger(__name__)

# Decisions a coordinator keeps for `satind status` and the tests (the newest).
KEPT_DECISIONS = 100
# seconds. How often a coordinator looks whether peers it drained are gone, to release
# their machines (``release_loop``): a membership lookup, not a message.
RELEASE_POLL_S = 1.0


def app_benchmark(peer: Host, run_id: str) -> float:
    """The last timing here of ``run_id``'s plugin's own benchmark (0: it has none, or it
    was not timed yet), starting the next timing in the background: answering the
    coordinator never waits for plugin code (adaptivity/measure.py ``AppBenchmarks``)."""
    run = peer.state.runs.active.get(run_id)
    if run is None:
        return 0.0
    info = run.info
    plugin = peer.state.plugin_version(info.plugin, info.code_hash)
    if plugin is None or plugin.benchmark is None:
        return 0.0
    benchmarks = peer.benchmarks
    # By plugin and code: plugins of one package share a code hash, not a benchmark.
    key = f"{info.plugin}:{info.code_hash}"
    if benchmarks.start(key):
        work = plugin.benchmark

        async def time_it() -> None:
            cpu_s = None
            try:
                cpu_s = await peer.compute.time_benchmark(work)
            except Exception as exc:
                # A broken benchmark costs this peer its application speed, nothing else:
                # the fixed loop stands in.
                log.warning("adapt: plugin %s's benchmark failed: %r", info.plugin, exc)
            finally:
                benchmarks.done(key, cpu_s)

        peer.spawn_task(time_it)
    return benchmarks.cpu_s.get(key, 0.0)


def measure(peer: Host, run_id: str) -> m.LoadReply:
    """This peer's answer to a LoadRequest for ``run_id`` (``req`` 0: for its own use)."""
    state = peer.state
    return m.LoadReply(
        0,
        state.cluster,
        state.utilization.idle_total(peer.now()),
        state.utilization.wide_wait_s,
        peer.compute.cpu_seconds(),
        peer.compute.benchmark_cpu_s(peer.cfg.adapt.benchmark_loops),
        state.standby,
        float(state.run_counters(run_id).get("progress", 0.0)),
        peer.compute.busy_seconds(),
        app_benchmark(peer, run_id),
    )


def on_load_request(peer: Host, link: Link, msg: m.LoadRequest) -> None:
    peer.apply([Reply(link, dataclasses.replace(measure(peer, msg.run_id), req=msg.req))])


def _sample(name: str, at: float, reply: m.LoadReply) -> Sample:
    return Sample(
        name,
        reply.cluster,
        at,
        reply.idle_s,
        reply.wide_wait_s,
        reply.cpu_s,
        reply.bench_cpu_s,
        reply.standby,
        reply.progress,
        reply.busy_s,
        reply.app_bench_cpu_s,
    )


@dataclass(frozen=True)
class Made:
    """One period's decision, as a coordinator made it."""

    at: float
    run_id: str
    peers: int
    decision: Decision
    admitted: tuple[str, ...] = ()
    provisioned: int = 0


class Coordinator:
    def __init__(self, peer: Host) -> None:
        self.peer = peer
        self.cfg = peer.cfg.adapt
        self._before: dict[str, Sample] = {}
        self._run = ""
        self.decisions: collections.deque[Made] = collections.deque(maxlen=KEPT_DECISIONS)
        # Provisioning: the simulator's own, else the configured command.
        self.provision: Callable[[int], None] | None = None
        self._provisioning = False
        # Peers asked of provisioning count as coming until this time (max_peers).
        self._expected = 0
        self._expected_until = 0.0
        # Peers it drained, not gone yet: name -> host (``release_loop``); and the slots it
        # gave back, oldest first (for `satind status` and the tests).
        self._drained: dict[str, str] = {}
        self.released: collections.deque[str] = collections.deque(maxlen=KEPT_DECISIONS)

    def recent(self, count: int = 5) -> list[m.AdaptDecision]:
        """The last ``count`` decisions, as a status line carries them (wall-clock times)."""
        now, wall = self.peer.now(), time.time()
        out = []
        for made in list(self.decisions)[-count:]:
            d = made.decision
            if d.add:
                action = f"add {d.add}"
            elif d.drain_cluster:
                action = f"drain cluster {d.drain_cluster}"
            elif d.drain:
                action = "drain " + ", ".join(slot_of(name) for name in d.drain)
            else:
                action = "wait"
            at = round(wall - (now - made.at), 3)
            eff = round(d.wa_efficiency, 3)
            out.append(m.AdaptDecision(at, made.run_id, made.peers, eff, action, d.why))
        return out

    def coordinated_run(self) -> str:
        """The run whose master coordinates: the oldest in progress that this peer masters
        ("" when it masters none, or an older run has another master)."""
        state = self.peer.state
        if state.draining or not state.runs.active:
            return ""
        oldest = min(state.runs.active.values(), key=lambda r: (r.started, r.info.run_id))
        if oldest.info.master != state.name or oldest.root is None:
            return ""
        return oldest.info.run_id

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.release_loop)
            task_status.started()
            await self.coordinate()

    async def coordinate(self) -> None:
        """Sample, decide and act, every period, while this peer coordinates a run."""
        while True:
            await trio.sleep(self.cfg.period_s)
            run_id = self.coordinated_run()
            if not run_id:
                self._before, self._run = {}, ""
                continue
            if run_id != self._run:
                self._before, self._run = {}, run_id  # a new run: its first period starts now
            samples = await self.sample(run_id)
            peers = periods(self._before, samples)
            self._before = {s.name: s for s in samples}
            if not peers:
                continue
            previous = self.decisions[-1].decision if self.decisions else None
            size = self.working_size()
            done = min(1.0, sum(s.progress for s in samples))
            decision = confirm(
                decide(peers, self.cfg, self.peer.name, size, done), previous, self.cfg
            )
            self.act(run_id, len(peers), decision, samples)

    def working_size(self) -> int:
        """Working members (not standby or reclaimed), or more while provisioned peers are
        expected: they count from their request until they join, at most three periods."""
        working = sum(1 for mem in self.peer.state.members() if not mem.reclaimed)
        if self.peer.now() < self._expected_until:
            return max(working, self._expected)
        return working

    async def sample(self, run_id: str) -> list[Sample]:
        peer = self.peer
        answers = await ask_all(
            peer, lambda req: m.LoadRequest(req, run_id), m.LoadReply, peer.cfg.run.stats_timeout_s
        )
        now = peer.now()
        own = _sample(peer.name, now, measure(peer, run_id))
        got = [own, *(_sample(name, now, reply) for name, reply in answers)]
        answered = {s.name for s in got}
        me = peer.state.cluster
        # Members that did not answer in time (and are not standby or reclaimed) count as all
        # overhead from their second silent period on (coordinator.periods).
        for mem in peer.state.members():
            if mem.name in answered or mem.reclaimed:
                continue
            wide = mem.cluster != me
            got.append(Sample(mem.name, mem.cluster, now, 0, 0, 0, 1, missing=True, wide=wide))
        return got

    def act(self, run_id: str, n: int, decision: Decision, samples: list[Sample]) -> None:
        peer = self.peer
        reason = f"coordinator {peer.name} (run {run_id}): {decision.why}"
        admitted: tuple[str, ...] = ()
        provisioned = 0
        drain: list[str] = list(decision.drain)
        if decision.drain_cluster:
            drain = sorted(
                mem.name
                for mem in peer.state.members()
                if mem.cluster == decision.drain_cluster and mem.name != peer.name
            )
        for name in drain:
            peer.post(name, m.Drain(reason, drain))
            member = peer.table.get(name)
            self._drained[name] = member.address.host if member is not None else ""
        if decision.add:
            standby = sorted(s.name for s in samples if s.standby)
            admitted = tuple(standby[: decision.add])
            for name in admitted:
                peer.post(name, m.Reclaim(False, f"admitted by {reason}"))
            provisioned = decision.add - len(admitted)
            if provisioned and not self._provision(provisioned):
                provisioned = 0
            if provisioned:
                self._expected = self.working_size() + provisioned
                self._expected_until = peer.now() + 3 * self.cfg.period_s
        log.info(
            "adapt: wa_efficiency %.2f over %d peers: %s%s%s%s",
            decision.wa_efficiency,
            n,
            decision.why,
            f"; draining {', '.join(drain)}" if drain else "",
            f"; admitting {', '.join(admitted)}" if admitted else "",
            f"; provisioning {provisioned}" if provisioned else "",
        )
        self.decisions.append(Made(peer.now(), run_id, n, decision, admitted, provisioned))

    def _provision(self, count: int) -> bool:
        """Ask for ``count`` more peers; False when nobody can give them (or a request is
        still running)."""
        command = self.cfg.provision_command
        if not command:
            return False
        if self.provision is not None:
            self.provision(count)
            return True
        if self._provisioning:
            return False
        self._provisioning = True

        def done() -> None:
            self._provisioning = False

        env = {"SATIND_PEERS_WANTED": str(count)}
        self.peer.spawn_task(self._command, "provision", [*command, str(count)], env, done)
        return True

    async def release_loop(self) -> None:
        """Give the machines of peers this coordinator drained back to the provisioning side
        once they are gone (left, or lost on the way): ``[adapt] release_command`` with the
        peer's slot and host, once per peer. Only gone peers: a peer still draining holds
        results that it hands over before it leaves."""
        while True:
            await trio.sleep(RELEASE_POLL_S)
            if not self._drained:
                continue
            gone = {}
            for name in list(self._drained):
                member = self.peer.table.get(name)
                if member is None or member.state.gone:
                    gone[name] = self._drained.pop(name)
            for name, host in sorted(gone.items()):
                slot = slot_of(name)
                self.released.append(slot)
                command = self.cfg.release_command
                if command:
                    env = {"SATIND_RELEASED_SLOT": slot, "SATIND_RELEASED_HOST": host}
                    self.peer.spawn_task(self._command, "release", [*command, slot, host], env)
                log.info("adapt: %s (on %s) drained and gone: released", slot, host)

    async def _command(
        self,
        what: str,
        argv: list[str],
        env: dict[str, str],
        done: Callable[[], None] | None = None,
    ) -> None:
        """Run a provisioning-side command, logging how it failed (it is the operator's)."""
        try:
            finished = await trio.run_process(
                argv,
                check=False,
                env={**os.environ, **env},
                capture_stdout=True,
                capture_stderr=True,
            )
            if finished.returncode != 0:
                log.error(
                    "adapt: %s command %s exited %d: %s",
                    what,
                    argv,
                    finished.returncode,
                    finished.stderr.decode(errors="replace")[-500:],
                )
        except OSError as exc:
            log.error("adapt: cannot run %s command %s: %s", what, argv, exc)
        finally:
            if done is not None:
                done()
