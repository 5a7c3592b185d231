"""What `satind status` and the progress of a run say of an iterative or SPMD run: its
iteration of how many (issue 32, point 3), not a share of a tree that each iteration's jobs
make look done after the first; and whose runs' arguments a client sees (issue 45)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from satind import stats
from satind.core.model.spmd import Placement
from satind.core.state import PeerState
from satind.net import codec, tls
from satind.net import messages as m
from satind.net.parties import Identity
from satind.node.permissions import shown_to
from satind.node.status import PART, iteration_of, local_runs, merge_runs
from tests.core.support import PLUGINS, info, known_run, make_state

HEAT = PLUGINS["heat2d"]
KMEANS = PLUGINS["kmeans"]


@dataclass
class _Host:
    """What local_runs reads of a peer."""

    state: PeerState
    name: str = "a/0"

    def now(self) -> float:
        return 40.0


def _run(state: PeerState, run_id: str, plugin_name: str, argv: list[str]) -> None:
    plugin = PLUGINS[plugin_name]
    args = codec.encode_value(plugin.parse_args(argv))
    known_run(state, m.RunInfo(run_id, plugin_name, plugin.code_hash, argv, args, state.name))


def test_an_spmd_run_is_at_its_iteration_of_how_many_it_makes() -> None:
    state = make_state()
    _run(state, "heat", "heat2d", ["200", "200", "300", "8"])
    assert iteration_of(state, "heat") == (0, 0)  # no entity placed yet
    state.spmd.runs["heat"] = Placement(iterations=300, iteration=206)
    assert iteration_of(state, "heat") == (206, 300)


def test_an_iterative_run_is_at_its_last_barrier_and_its_end_is_not_known() -> None:
    state = make_state()
    _run(state, "km", "kmeans", ["600", "6", "12", "3", "40"])
    assert iteration_of(state, "km") == (0, 0)
    state.iterative.barriers["km"] = (0, 7, b"")
    assert iteration_of(state, "km") == (7, 0)


def test_a_divide_and_conquer_run_has_no_iteration() -> None:
    state = make_state()
    known_run(state, info("fib"))
    assert iteration_of(state, "fib") == (-1, 0)
    assert iteration_of(state, "unknown") == (-1, 0)


def test_the_status_line_of_an_spmd_run_gives_its_iterations_done_as_its_progress() -> None:
    state = make_state()
    _run(state, "heat", "heat2d", ["200", "200", "300", "8"])
    state.runs.active["heat"].started = 10.0
    state.spmd.runs["heat"] = Placement(iterations=300, iteration=206, moves=2)
    rows = local_runs(_Host(state))  # type: ignore[arg-type]
    head = next(r for r in rows if r.state == "running")
    assert head.counters == {"iteration": 206, "iterations": 300, "entity_moves": 2}
    # Every member's share of the tree says "done" (each iteration's jobs are new children
    # of the root): the master's iterations win.
    share = m.RunStatus("heat", "heat2d", [], "a/0", PART, 1.0, 0.0, {"jobs_run": 5})
    (merged,) = merge_runs([head, share])
    assert merged.progress == 206 / 300
    assert merged.counters["iteration"] == 206 and merged.counters["jobs_run"] == 5
    assert merged.elapsed_s == 30.0


def test_a_running_run_no_member_has_begun_a_job_of_is_waiting_for_peers() -> None:
    head = m.RunStatus("r", "fib", ["30"], "a/0", "running", 0.0, 12.0)
    idle = m.RunStatus("r", "fib", ["30"], "a/0", PART, 0.0, 0.0, {"jobs_entered": 0})
    begun = m.RunStatus("r", "fib", ["30"], "b/0", PART, 0.0, 0.0, {"jobs_entered": 1})
    (waiting,) = merge_runs([head, idle, dataclasses.replace(idle, master="b/0")])
    assert waiting.waiting and waiting.state == "running"
    (working,) = merge_runs([head, idle, begun])  # one member began its root: under way
    assert not working.waiting
    # Not running: not waiting, whatever its counters; nor with no member's share to sum.
    assert not merge_runs([dataclasses.replace(head, state="done"), idle])[0].waiting
    assert not merge_runs([head])[0].waiting
    # An iterative run's master counts iterations: at its first, it is under way.
    assert not stats.waiting_for_peers("running", {"iteration": 0})
    assert not stats.waiting_for_peers("running", {"jobs_run": 3})  # a path that counts no entry
    assert stats.waiting_for_peers("running", {})


@dataclass
class _Link:
    """What permissions.shown_to reads of a connection."""

    remote: Identity | None
    remote_name: str = ""


def test_a_client_without_the_operate_grant_sees_the_arguments_of_its_own_runs_only() -> None:
    state = make_state()
    known_run(state, dataclasses.replace(info("mine", argv=("20",)), owner="alice"))
    known_run(state, dataclasses.replace(info("theirs", argv=("21",)), owner="bob"))
    lines = local_runs(_Host(state))  # type: ignore[arg-type]
    unknown = m.RunStatus("elsewhere", "fib", ["22"], "c/0", "running", 0.0, 0.0)

    def shown(link: _Link) -> dict[str, list[str]]:
        return {r.run_id: r.argv for r in shown_to(link, state, [*lines, unknown])}  # type: ignore[arg-type]

    alice = Identity("alice~1", "", tls.ROLE_CLIENT, frozenset({tls.GRANT_SUBMIT}))
    assert shown(_Link(alice, "alice~1")) == {"mine": ["20"], "theirs": [], "elsewhere": []}
    ops = Identity("ops~1", "", tls.ROLE_CLIENT, frozenset(tls.GRANTS))
    every = {"mine": ["20"], "theirs": ["21"], "elsewhere": ["22"]}
    assert shown(_Link(ops, "ops~1")) == every
    member = Identity("b/0#1", "c0", tls.ROLE_PEER)
    assert shown(_Link(member, "b/0#1")) == every  # members sum shares: they see everything
    assert shown(_Link(None)) == every
