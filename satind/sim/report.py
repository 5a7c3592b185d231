"""What a simulation reports: the run's outcome, work done and redone, steals, traffic,
recovery and checkpoint counters, membership convergence — and every invariant it checks
(DESIGN "Invariants every test layer checks")."""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from satind.net import codec
from satind.net import messages as m
from satind.node.peer import Peer
from satind.plugin import Plugin
from satind.sim.lockstep import LockstepCompute
from satind.sim.scenario import RunSpec, Scenario
from satind.sim.workload import needles_in, walk


@dataclass
class RunOutcome:
    """What became of one of the scenario's other runs ([[runs]])."""

    spec: RunSpec
    run_id: str = ""
    submitted_at: float | None = None
    ended_at: float | None = None
    result: m.RunResult | None = None
    # Why it never ran (its master was not there, or it refused the submission).
    error: str = ""

    @property
    def over(self) -> bool:
        return self.result is not None or bool(self.error)


class _Digest(Protocol):
    def hexdigest(self) -> str: ...


class _Network(Protocol):
    @property
    def dropped(self) -> int: ...


class SimulationView(Protocol):
    """What a report reads of a finished simulation (``sim/simulator.py``'s ``Simulation``):
    declared here so the report does not import the simulator that makes it."""

    scenario: Scenario
    seed: int
    plugin: Plugin | None
    peers: dict[str, Peer]
    workers: dict[str, LockstepCompute]
    runs: list[RunOutcome]
    result: m.RunResult | None
    submit_error: str
    submitted_at: float
    result_at: float | None
    converged_at: float | None
    run_id: str
    work_s: float
    leaves: Counter[tuple[str, tuple[int, ...]]]
    leaf_cost: dict[tuple[str, tuple[int, ...]], float]
    leaf_runners: dict[tuple[str, tuple[int, ...]], list[str]]
    drained: set[str]
    gone: set[str]
    left_at: dict[str, float]
    checkpointed_leaves: set[tuple[int, ...]]
    leaves_after: Counter[tuple[int, ...]]
    leaves_before: set[tuple[int, ...]]
    results_checkpointed: int
    idle_from: float | None
    attempts_at_idle: int
    events: int

    @property
    def network(self) -> _Network: ...

    @property
    def hash(self) -> _Digest: ...

    @property
    def end(self) -> float: ...

    def live(self) -> list[str]: ...

    def steal_attempts(self) -> int: ...


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
    # Results read from lost members' checkpoint logs after a partial crash (core/logged.py).
    results_from_logs: int
    # Gossip messages that carried orphan tuples (combined: many tuples per message).
    tuple_messages: int
    # Leaves a peer finished before it drained that some peer ran again afterwards: a drained
    # peer hands everything over, so this stays 0 unless a later fault lost the results.
    drained_redone: int
    # When each drained peer left (virtual seconds).
    left_at: dict[str, float]
    # Leaves a peer finished before it crashed that some peer ran again afterwards: what a
    # crash cost in finished work (checkpoint policy "sel" keeps it at the leaves in flight).
    crashed_redone: int
    # After a total loss and a resume (faults crash_all, resume): leaves whose result the
    # checkpoint logs covered when the resume loaded them, and how many of those ran again.
    leaves_checkpointed: int
    checkpointed_redone: int
    leaves_after_resume: int
    checkpoint_bytes: int
    checkpoint_records: int
    # Results the resume loaded from the logs (after compaction), and the leaf work done
    # before the loss that was done again after it.
    results_checkpointed: int
    work_before_loss_s: float
    work_lost_s: float
    # The run's own statistics (its result's stats): spawns it counted, and the tree's.
    result_spawns: int
    spawns_expected: int
    # Speculation (a search workload): abort() calls, Abort messages, jobs cancelled, from
    # the run's own statistics.
    aborts: int
    abort_messages: int
    jobs_cancelled: int
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
    # The scenario's other runs ([[runs]]), in its order: plugin, master, run id, makespan
    # (virtual seconds from submission to result; None: no result), the plugin's check, and
    # the error (a failure, or why it never ran).
    runs: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def report(sim: SimulationView, wall_s: float) -> SimReport:
    """What a finished simulation did, and which invariants it broke."""
    violations: list[str] = []
    sc = sim.scenario
    result_ok = True
    leaves_expected = spawns_expected = 0
    if sc.workload is not None:
        answer, leaves_expected, _, spawns_expected = walk(sc.workload)
        if sc.workload.steps > 0:
            answer = answer * sc.workload.steps % 2**64
            spawns_expected *= sc.workload.steps
        if sim.submit_error:
            violations.append(f"a submit or resume was refused: {sim.submit_error}")
        if sim.result is None:
            result_ok = False
            violations.append(f"the run did not finish within {sc.duration_s:g} virtual s")
        elif sim.result.error is not None:
            result_ok = False
            violations.append(
                f"the run failed: {sim.result.error.type}: {sim.result.error.message}"
            )
        elif sc.workload.needles > 0:
            # A search: any needle is right; None only when the tree has none.
            assert sim.result.value is not None
            got = codec.decode_value(sim.result.value)
            needles = needles_in(sc.workload)
            if (got is None and needles) or (got is not None and tuple(got) not in needles):
                result_ok = False
                violations.append(f"wrong result {got}: not one of the {len(needles)} needles")
        else:
            assert sim.result.value is not None
            got = codec.decode_value(sim.result.value)
            if got != answer:
                result_ok = False
                violations.append(
                    f"wrong result {got}, expected {answer} (a lost or doubly applied leaf)"
                )
        unique = {path for (_, path) in sim.leaves}
        searched = sc.workload.needles > 0  # a search aborts: not every leaf runs
        if (
            sim.result is not None
            and sim.result.error is None
            and not searched
            and len(unique) != leaves_expected
        ):
            violations.append(f"{len(unique)} distinct leaves ran, the tree has {leaves_expected}")
    elif sim.plugin is not None:
        result_ok = _plugin_verdict(sim, violations)
    runs = [_other_run(outcome, violations) for outcome in sim.runs]
    live = sorted(sim.live())
    for name in live:
        view = [mem.name for mem in sim.peers[name].table.alive()]
        if view != live:
            missing = sorted(set(live) - set(view))
            extra = sorted(set(view) - set(live))
            violations.append(f"{name} disagrees on membership: missing {missing}, extra {extra}")
            break
    for name in live:
        peer = sim.peers[name]
        worker = sim.workers[name].worker
        left = len(peer.worker.queue)
        if (
            left
            or worker.nesting
            or peer.custody.given
            or peer.custody.taken
            or peer.state.cancelled
            or any(r.info.master for r in peer.runs.active.values())
        ):
            violations.append(
                f"{name} still has work at the end: queue {left}, running {worker.nesting}, "
                f"stolen out {len(peer.custody.given)}, taken {len(peer.custody.taken)}, "
                f"being cancelled {len(peer.state.cancelled)}, "
                f"active runs {len(peer.runs.active)}"
            )
    counters = [p.state.steal for p in sim.peers.values()]
    traffic = [p.transport.counters for p in sim.peers.values()]
    redone = sum((count - 1) * sim.leaf_cost[key] for key, count in sim.leaves.items())
    return SimReport(
        scenario=sc.name,
        seed=sim.seed,
        peers=len(sim.peers),
        makespan_s=None if sim.result_at is None else round(sim.result_at - sim.submitted_at, 6),
        result_ok=result_ok,
        work_s=round(sim.work_s, 6),
        redone_s=round(redone, 6),
        leaves_run=sum(sim.leaves.values()),
        leaves_unique=len(sim.leaves),
        leaves_expected=leaves_expected,
        steal_attempts_local=sum(c.steal_attempts_local for c in counters),
        steal_attempts_wide=sum(c.steal_attempts_wide for c in counters),
        stolen_local=sum(c.stolen_local for c in counters),
        stolen_wide=sum(c.stolen_wide for c in counters),
        messages=sum(t.messages for t in traffic),
        bytes=sum(t.bytes for t in traffic),
        messages_dropped=sim.network.dropped,
        jobs_restarted=sum(c.jobs_restarted for c in counters),
        tuples_sent=sum(p.orphans.counters.tuples_sent for p in sim.peers.values()),
        tuples_received=sum(p.orphans.counters.tuples_received for p in sim.peers.values()),
        results_reused=sum(p.orphans.counters.results_reused for p in sim.peers.values()),
        results_from_logs=sum(p.orphans.counters.results_from_logs for p in sim.peers.values()),
        tuple_messages=sum(p.announcer.messages for p in sim.peers.values()),
        drained_redone=sum(
            1
            for runners in sim.leaf_runners.values()
            if any(r in sim.drained for r in runners[:-1])
        ),
        left_at=dict(sim.left_at),
        crashed_redone=sum(
            1
            for runners in sim.leaf_runners.values()
            if any(r in sim.gone and r not in sim.drained for r in runners[:-1])
        ),
        leaves_checkpointed=len(sim.checkpointed_leaves),
        checkpointed_redone=sum(1 for leaf in sim.checkpointed_leaves if sim.leaves_after[leaf]),
        leaves_after_resume=sum(sim.leaves_after.values()),
        checkpoint_bytes=sum(p.checkpointer.bytes_written for p in sim.peers.values()),
        checkpoint_records=sum(p.checkpointer.counters.records_written for p in sim.peers.values()),
        results_checkpointed=sim.results_checkpointed,
        work_before_loss_s=round(
            sum(sim.leaf_cost[(sim.run_id, leaf)] for leaf in sim.leaves_before), 6
        ),
        work_lost_s=round(
            sum(
                sim.leaf_cost[(sim.run_id, leaf)]
                for leaf in sim.leaves_before
                if sim.leaves_after[leaf]
            ),
            6,
        ),
        result_spawns=int(sim.result.stats.get("spawns", 0)) if sim.result else 0,
        spawns_expected=spawns_expected,
        aborts=int(sim.result.stats.get("aborts", 0)) if sim.result else 0,
        abort_messages=int(sim.result.stats.get("abort_messages", 0)) if sim.result else 0,
        jobs_cancelled=int(sim.result.stats.get("jobs_cancelled", 0)) if sim.result else 0,
        steal_attempts_idle=sim.steal_attempts() - sim.attempts_at_idle
        if sim.idle_from is not None
        else 0,
        idle_s=round(sim.end - sim.idle_from, 6) if sim.idle_from is not None else 0.0,
        convergence_s=sim.converged_at,
        virtual_s=round(sim.end, 6),
        wall_s=round(wall_s, 3),
        trace_events=sim.events,
        trace_hash=sim.hash.hexdigest(),
        invariants_ok=not violations,
        violations=violations,
        runs=runs,
    )


def _other_run(outcome: RunOutcome, violations: list[str]) -> dict[str, Any]:
    """One of the scenario's other runs: it must end, without error, its check "ok"."""
    spec, result = outcome.spec, outcome.result
    what = f"{spec.plugin} {' '.join(spec.argv)} mastered by {spec.to}"
    error = outcome.error
    if result is not None and result.error is not None:
        error = f"{result.error.type}: {result.error.message}"
    if error:
        violations.append(f"run {what} failed: {error}")
    elif result is None:
        violations.append(f"run {what} did not finish")
    elif result.check != "ok":
        violations.append(f"run {what}: its check says {result.check}")
    ended, started = outcome.ended_at, outcome.submitted_at
    return {
        "plugin": spec.plugin,
        "master": spec.to,
        "run_id": outcome.run_id,
        "makespan_s": None if ended is None or started is None else round(ended - started, 6),
        "check": result.check if result is not None else None,
        "error": error,
    }


def _plugin_verdict(sim: SimulationView, violations: list[str]) -> bool:
    """A plugin run (``Simulation(plugin=...)``): it ended, without an error, and its check
    (made on the run's master) passed."""
    result = sim.result
    if sim.submit_error:
        violations.append(f"a submit or resume was refused: {sim.submit_error}")
    if result is None:
        violations.append(f"the run did not finish within {sim.scenario.duration_s:g} virtual s")
        return False
    if result.error is not None:
        violations.append(f"the run failed: {result.error.type}: {result.error.message}")
        return False
    if result.check != "ok":
        violations.append(f"the plugin's check: {result.check}")
        return False
    return True
