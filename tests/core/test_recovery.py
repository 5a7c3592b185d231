"""Recovery rules of the core (satin-fault-tolerance §3), as case tables: restart, orphans,
election and epochs, the stale master, drain. Event in, effects out: no sockets, no clock."""

from __future__ import annotations

import dataclasses

import pytest

from satind.client.client import VERSION_MISMATCH
from satind.config import Config
from satind.core import (
    admission,
    drain,
    election,
    lifecycle,
    master,
    orphans,
    restart,
    timers,
)
from satind.core.effects import (
    Changed,
    Log,
    QueueRoot,
    Send,
    Spread,
    Task,
    Timer,
    ToCompute,
    WakeWaiters,
)
from satind.core.events import RunsHeard
from satind.core.handle import handle
from satind.core.model.timers import ElectAgain
from satind.core.runs import VersionMismatch, supersedes
from satind.core.state import PeerState
from satind.engine.frames import JobArrived, Orphaned
from satind.membership.view import Member, MemberTable, State
from satind.net import codec
from satind.net import messages as m
from satind.net.codec import Encoded
from satind.net.transport import Address
from satind.plugin import hooks
from satind.work.errors import error_info
from tests.core.support import (
    FIB,
    PLUGINS,
    FakeLink,
    declare,
    gone,
    info,
    job_of,
    known_run,
    make_state,
    member,
)


def test_a_dead_thief_loses_its_jobs_and_what_it_gave_us_is_aborted() -> None:
    state = make_state()
    run = known_run(state, info(master="c/0"))
    parent = job_of(run.state)
    lent = job_of(run.state, parent=parent, index=2)  # a job of ours b/0 stole
    state.custody.give(("r1", lent.path), lent, "b/0", 0.0)
    borrowed = job_of(run.state, index=5)  # a job we stole from b/0
    borrowed.origin = "b/0"
    state.custody.take(("r1", borrowed.path), "b/0", borrowed)
    sent = m.JobResult("r1", b"\x07", codec.encode_value(3), None)  # a result we sent b/0
    state.custody.finished(("r1", b"\x07"), "b/0", sent)
    fx = restart.on_member_change(state, gone(state, "b/0"), 1.0)
    assert ToCompute(JobArrived(lent, restarted=True)) in fx  # its leaves count as redone
    assert ToCompute(Orphaned(borrowed)) in fx
    assert Log("result", sent) in fx and Spread(m.OrphanTuple("r1", b"\x07", "a/0")) in fx
    assert state.steal.jobs_restarted == 1
    assert not state.custody.given and not state.custody.taken


def test_a_member_that_left_is_recovered_like_a_dead_one() -> None:
    state = make_state()
    run = known_run(state, info(master="c/0"))
    job = job_of(run.state, parent=job_of(run.state), index=1)
    state.custody.give(("r1", job.path), job, "b/0", 0.0)
    fx = restart.on_member_change(state, gone(state, "b/0", State.LEFT), 1.0)
    assert ToCompute(JobArrived(job, restarted=True)) in fx


@pytest.mark.parametrize(
    ("new", "old", "wins"),
    [
        ((1, "z/0"), (0, "a/0"), True),  # a higher epoch wins, whatever the names
        ((0, "z/0"), (1, "a/0"), False),  # a lower epoch never does
        ((1, "a/0"), (1, "b/0"), True),  # equal epochs: the smaller master name
        ((1, "b/0"), (1, "a/0"), False),
        ((1, "a/0"), (1, "a/0"), False),  # the same descriptor is no news
    ],
)
def test_which_epoch_supersedes(new: tuple[int, str], old: tuple[int, str], wins: bool) -> None:
    assert supersedes(info(master=new[1], epoch=new[0]), info(master=old[1], epoch=old[0])) is wins


def test_the_smallest_alive_member_takes_over_a_run_whose_master_died() -> None:
    state = make_state("a/0", ("b/0", "c/0"))
    run = known_run(state, info(master="c/0"))
    fx = restart.on_member_change(state, gone(state, "c/0"), 3.0)
    assert run.info.master == "a/0" and run.info.epoch == 1
    roots = [f for f in fx if isinstance(f, QueueRoot)]
    assert len(roots) == 1 and isinstance(roots[0].job.args, Encoded)  # decoded by compute
    assert Send("b/0", m.Gossip(m.Broadcasts([], [m.RunAnnounce(run.info, "running")], []))) in fx


def test_only_the_smallest_alive_member_takes_over() -> None:
    state = make_state("b/0", ("a/0", "c/0"))
    run = known_run(state, info(master="c/0"))
    declare(state, "c/0", State.DEAD)
    assert election.elect(state, 3.0) == [] and run.info.master == "c/0"


def test_a_master_taken_for_dead_follows_the_new_epoch_and_forwards_the_result() -> None:
    state = make_state()
    run = known_run(state)  # we master it, epoch 0
    run.submitter = "client~1"
    newer = m.RunAnnounce(info(master="b/0", epoch=1), "running")
    fx = lifecycle.on_announces(state, [newer], 2.0)
    assert WakeWaiters("r1") in fx and Task("forward_result", "r1", "client~1") in fx
    assert run.info.master == "b/0" and run.root is None and run.submitter is None


def test_news_of_an_older_epoch_is_ignored() -> None:
    state = make_state()
    run = known_run(state, info(master="b/0", epoch=2))
    older = m.RunAnnounce(info(master="c/0", epoch=1), "running")
    assert lifecycle.on_announces(state, [older], 2.0) == []
    assert run.info.master == "b/0" and run.info.epoch == 2


def test_a_stale_master_that_hears_its_run_ended_drops_its_epoch() -> None:
    state = make_state()
    run = known_run(state)  # we master epoch 0; we were paused, b/0 took over and finished
    run.submitter = "client~1"
    state.queue.push(job_of(run.state))
    done = m.RunAnnounce(info(master="b/0", epoch=1), "done")
    fx = lifecycle.on_announces(state, [done], 9.0)
    assert Task("forward_result", "r1", "client~1") in fx and WakeWaiters("r1") in fx
    assert "r1" not in state.runs.active and run.state.aborted
    assert not state.queue.jobs  # its queued jobs go with it
    assert state.runs.master_of("r1", "a/0") == "b/0"


def test_the_end_of_a_run_drops_it_at_its_participants() -> None:
    state = make_state()
    run = known_run(state, info(master="b/0"))
    job = job_of(run.state)
    state.custody.give(("r1", job.path), job, "c/0", 0.0)
    fx = lifecycle.on_announces(state, [m.RunAnnounce(info(master="b/0"), "done")], 1.0)
    assert Log("end", m.RunAnnounce(info(master="b/0"), "done")) in fx
    assert run.state.aborted and not state.custody.given
    # ... and later news of it is ignored.
    assert lifecycle.on_announces(state, [m.RunAnnounce(info(master="b/0"), "running")], 2.0) == []


def test_a_spawned_job_kept_as_an_orphan_is_fetched_from_its_holder() -> None:
    state = make_state()
    run = known_run(state)
    job = job_of(run.state, parent=job_of(run.state), index=1)
    assert orphans.fetch_orphan(state, job, "b/0", 1.0) == [Send("b/0", m.JobQuery("r1", job.path))]
    assert state.custody.given[("r1", job.path)][0].adopted
    declare(state, "c/0", State.DEAD)
    other = job_of(run.state, parent=job_of(run.state), index=2)
    assert orphans.fetch_orphan(state, other, "c/0", 1.0) == [ToCompute(JobArrived(other))]


def test_tuples_of_gone_holders_are_not_filed() -> None:
    state = make_state()
    run = known_run(state)
    declare(state, "c/0", State.DEAD)
    fx = orphans.on_tuples(
        state, [m.OrphanTuple("r1", b"\x01", "c/0"), m.OrphanTuple("r1", b"\x02", "b/0")]
    )
    # Filed, not spread on: its holder announced it to every member (node/announce.py).
    assert fx == []
    assert run.state.orphans == {b"\x02": "b/0"}


def test_a_drain_waits_for_jobs_out_with_thieves_then_hands_over() -> None:
    state = make_state()
    run = known_run(state, info(master="b/0"))
    job = job_of(run.state)
    state.custody.give(("r1", job.path), job, "c/0", 0.0)
    drain.start(state, "asked")
    assert state.draining and not drain.drained(state)
    state.custody.returned(("r1", job.path))
    assert drain.drained(state)
    kept = m.JobResult("r1", b"\x09", codec.encode_value(4), None)
    state.orphans.keep(kept)
    fx = drain.leave(state)
    shares = [f for f in fx if isinstance(f, Send) and isinstance(f.msg, m.RunShare)]
    assert [s.dest for s in shares] == ["b/0"]
    handed = [f.msg for f in fx if isinstance(f, Send) and isinstance(f.msg, m.HandOver)]
    assert len(handed) == 1 and isinstance(handed[0], m.HandOver)
    assert handed[0].results == [kept]


def test_a_draining_thief_gives_back_the_stolen_jobs_it_has_not_started() -> None:
    # A thief holding half of a bag (steal.batch_max) would keep its drain waiting while it
    # runs them: the ones still queued go back to their victim ("unknown": the victim takes
    # each back), the one the compute side already took stays and is finished here.
    state = make_state()
    run = known_run(state, info(master="b/0"))
    queued = [job_of(run.state, (i,), index=i) for i in range(3)]
    running = job_of(run.state, (9,), index=9)
    for job in [*queued, running]:
        job.origin = "b/0"
        state.custody.take(("r1", job.path), "b/0", job)
    for job in queued:
        state.queue.push(job)
    fx = drain.start(state, "asked")
    back = [f.msg for f in fx if isinstance(f, Send) and isinstance(f.msg, m.JobState)]
    assert [(msg.path, msg.state) for msg in back] == [(j.path, "unknown") for j in queued]
    assert all(f.dest == "b/0" for f in fx if isinstance(f, Send))
    assert not state.queue.jobs
    assert list(state.custody.taken) == [(("r1", running.path), "b/0")]


def test_a_draining_master_stays_until_its_runs_are_over() -> None:
    state = make_state()
    known_run(state)  # mastered here
    drain.start(state, "asked")
    assert not drain.drained(state)


def test_a_cancelled_run_is_dropped_by_its_participants_and_final_in_their_logs() -> None:
    state = make_state()
    run = known_run(state, info(master="b/0"))
    job = job_of(run.state)
    state.queue.push(job_of(run.state))
    state.custody.give(("r1", job.path), job, "c/0", 0.0)
    cancelled = m.RunAnnounce(info(master="b/0"), "cancelled")
    fx = lifecycle.on_announces(state, [cancelled], 1.0)
    assert Log("end", cancelled) in fx
    assert run.state.aborted and not state.custody.given and not state.queue.jobs
    assert state.runs.status_of("r1") == "cancelled"


def test_a_run_queued_by_a_master_that_died_is_started_by_the_elected_peer() -> None:
    state = make_state("a/0", ("b/0", "c/0"))
    queued = info(master="c/0", run_id="q1")
    fx = lifecycle.on_announces(state, [m.RunAnnounce(queued, "queued")], 1.0)
    assert Spread(m.RunAnnounce(queued, "queued")) in fx  # news: spread on
    assert state.runs.status_of("q1") == "queued" and state.runs.master_of("q1", "a/0") == "c/0"
    assert "q1" not in state.runs.active  # nothing to steal for while it waits
    fx = restart.on_member_change(state, gone(state, "c/0"), 3.0)
    run = state.runs.active["q1"]
    assert run.info.master == "a/0" and run.info.epoch == 1 and run.status == "running"
    assert any(isinstance(f, QueueRoot) and f.job.run is run.state for f in fx)
    assert not state.runs.queued_elsewhere


def test_a_queued_run_that_started_or_ended_elsewhere_is_forgotten() -> None:
    state = make_state("a/0", ("b/0", "c/0"))
    queued = info(master="c/0", run_id="q1")
    lifecycle.on_announces(state, [m.RunAnnounce(queued, "queued")], 1.0)
    lifecycle.on_announces(state, [m.RunAnnounce(queued, "running")], 2.0)
    assert not state.runs.queued_elsewhere and "q1" in state.runs.active
    other = info(master="c/0", run_id="q2")
    lifecycle.on_announces(state, [m.RunAnnounce(other, "queued")], 1.0)
    lifecycle.on_announces(state, [m.RunAnnounce(other, "cancelled")], 2.0)
    assert not state.runs.queued_elsewhere and state.runs.status_of("q2") == "cancelled"
    # A peer that is not the one to take over does nothing.
    late = make_state("b/0", ("a/0", "c/0"))
    lifecycle.on_announces(late, [m.RunAnnounce(queued, "queued")], 1.0)
    declare(late, "c/0", State.DEAD)
    assert election.elect(late, 3.0) == [] and "q1" in late.runs.queued_elsewhere


# -- a draining master hands its runs over (drain.py) ------------------------------------------


def _change(state: PeerState, name: str, **changes: object) -> None:
    """A member as its gossip would describe it (its plugins, whether it drains)."""
    known = state.table.get(name)
    assert known is not None
    state.table._put(dataclasses.replace(known, **changes))  # type: ignore[arg-type]


def _with_plugins(state: PeerState, *names: str) -> None:
    for name in names:
        _change(state, name, plugins={"fib": FIB.code_hash})


def test_a_draining_master_hands_its_run_over_and_leaves_once_the_heir_has_it() -> None:
    state = make_state("a/0", ("b/0", "c/0"))
    _with_plugins(state, "b/0", "c/0")
    run = known_run(state)  # mastered here
    run.root = root = job_of(run.state)
    kept = m.JobResult("r1", b"\x02", codec.encode_value(8), None)
    state.orphans.keep(kept)  # finished below the root: kept when its frames were cut
    lent = job_of(run.state, parent=root, index=1)
    state.custody.give(("r1", lent.path), lent, "c/0", 0.0)  # a thief still has it
    drain.start(state, "asked")
    # The root subtree is cut first (once), and the run is not handed over yet.
    assert drain.hand_over_runs(state) == [ToCompute(Orphaned(root))]
    assert drain.hand_over_runs(state) == []
    assert run.cutting and run.handed_to is None
    # The root is dropped: the heir — the smallest name that stays and has the plugin —
    # gets the results, then the run, in that order (one message here).
    fx = drain.root_dropped(state, root, 2.0)
    assert fx == [Send("b/0", m.HandOver([kept], [info()], []))]
    assert run.handed_to == "b/0" and run.root is None
    state.worker_idle, state.worker_frames = True, 0
    # Not before the heir announced the new epoch (else the members would elect their own).
    assert not drain.drained(state)
    new = dataclasses.replace(info(), master="b/0", epoch=1)
    lifecycle.on_announces(state, [m.RunAnnounce(new, "running")], 3.0)
    assert run.info.master == "b/0"
    # The job out with c/0 is not waited for; the heir gets our share, and no result twice.
    assert drain.drained(state)
    left = drain.leave(state)
    assert [f.dest for f in left if isinstance(f, Send) and isinstance(f.msg, m.RunShare)] == [
        "b/0"
    ]
    assert not [f for f in left if isinstance(f, Send) and isinstance(f.msg, m.HandOver)]


def test_the_heir_is_a_member_that_stays_and_has_the_plugin_else_the_master_stays() -> None:
    state = make_state("a/0", ("b/0", "c/0", "d/0"))
    _with_plugins(state, "c/0", "d/0")  # b/0 does not have fib
    _change(state, "c/0", draining=True)  # c/0 drains too
    assert drain.heir(state, info()) == "d/0"
    _change(state, "d/0", draining=True)
    assert drain.heir(state, info()) is None
    run = known_run(state)
    run.root = job_of(run.state)
    drain.start(state, "asked")
    assert drain.hand_over_runs(state) == []  # nobody to take it: it stays here
    assert not drain.drained(state)


def test_a_machine_drained_at_once_hands_its_runs_to_another_machine() -> None:
    """`satind stop --drain` on the master's machine: the sibling a/1 is named in the drain
    (Drain.leaving) before gossip says it drains, and never inherits the run or the results
    (a sibling heir would have to hand the run on again, and once did not)."""
    state = make_state("a/0", ("a/1", "b/0"))
    _with_plugins(state, "a/1", "b/0")
    run = known_run(state)
    run.root = root = job_of(run.state)
    state.orphans.keep(m.JobResult("r1", b"\x02", codec.encode_value(8), None))
    assert drain.heir(state, info()) == "a/1"  # the smallest name, as far as gossip knows
    drain.start(state, "stop --drain", leaving=["a/0", "a/1"])
    assert drain.heir(state, info()) == "b/0"
    drain.hand_over_runs(state)
    fx = drain.root_dropped(state, root, 2.0)
    assert [f.dest for f in fx if isinstance(f, Send)] == ["b/0"]


def test_a_draining_peer_that_inherits_a_run_hands_it_on() -> None:
    """An heir that drains meanwhile (or was not known to) starts the run and is woken to
    hand it over again: starting a run is a change a drain waits for."""
    state = make_state("b/0", ("a/0", "c/0"))
    _with_plugins(state, "c/0")
    known_run(state)  # mastered by a/0, which drains
    drain.start(state, "asked")
    fx = drain.on_hand_over(state, m.HandOver([], [info()], []), 1.0)
    assert Changed() in fx
    run = state.runs.active["r1"]
    assert run.info.master == "b/0" and run.root is not None
    assert drain.hand_over_runs(state) == [ToCompute(Orphaned(run.root))]


def test_a_master_whose_heir_left_meanwhile_respawns_the_run_itself() -> None:
    state = make_state("a/0", ("b/0",))
    _with_plugins(state, "b/0")
    run = known_run(state)
    run.root = root = job_of(run.state)
    drain.start(state, "asked")
    drain.hand_over_runs(state)
    declare(state, "b/0", State.LEFT)
    fx = drain.root_dropped(state, root, 2.0)
    assert run.info.master == "a/0" and run.info.epoch == 1  # taken over here, next epoch
    assert any(isinstance(f, QueueRoot) for f in fx) and run.handed_to is None


def test_the_heir_files_the_results_then_takes_the_run_over() -> None:
    state = make_state("b/0", ("a/0", "c/0"))
    run = known_run(state)  # mastered by a/0, which drains
    kept = m.JobResult("r1", b"\x02", codec.encode_value(8), None)
    fx = drain.on_hand_over(state, m.HandOver([kept], [info()], []), 1.0)
    assert run.info.master == "b/0" and run.info.epoch == 1
    assert run.state.orphans == {b"\x02": "b/0"}  # filed before the root was respawned
    assert run.root is not None and QueueRoot(run.root) in fx
    # A hand-over of a run that moved on meanwhile (an election got there first) is ignored.
    again = drain.on_hand_over(state, m.HandOver([], [info()], []), 2.0)
    assert not [f for f in again if isinstance(f, QueueRoot)] and run.info.epoch == 1


def test_a_draining_master_hands_its_queued_runs_over_at_once() -> None:
    state = make_state("a/0", ("b/0",))
    _with_plugins(state, "b/0")
    queued = known_run(state, info("r2"))
    state.runs.remove("r2")
    queued.submitter = "client-1"
    state.runs.queue.append(queued)
    drain.start(state, "asked")
    fx = drain.hand_over_runs(state)
    assert Send("b/0", m.HandOver([], [], [info("r2")])) in fx
    assert Task("forward_result", "r2", "client-1") in fx and WakeWaiters("r2") in fx
    assert not state.runs.queue and state.runs.master_of("r2", "a/0") == "b/0"


def test_a_run_known_only_from_a_stolen_job_learns_its_arguments_and_can_be_taken_over() -> None:
    """A steal reply can come before the run's announcement: the run is then known as a stub
    without its arguments. The announcement completes it, and a peer that learns a run whose
    master is already gone takes it over then (it was the one elected, but could not)."""
    state = make_state("a/0", ("b/0", "c/0"))
    full = info(master="b/0")
    stub = dataclasses.replace(full, args=b"")
    lifecycle.register(state, stub)
    declare(state, "b/0", State.DEAD)
    assert election.elect(state, 1.0) == []  # elected, but it cannot respawn a stub
    lifecycle.on_announces(state, [m.RunAnnounce(full, "running")], 2.0)
    run = state.runs.active["r1"]
    assert run.info.args == full.args
    # The second chance comes once the run has been orphaned ft.takeover_grace_s (a peer
    # that was paused believes everybody dead for a while: it must not take runs over then).
    grace = state.cfg.ft.takeover_grace_s
    assert election.elect_late(state, 3.0) == []
    assert election.elect_late(state, 3.0 + grace / 2) == []
    fx = election.elect_late(state, 3.0 + grace)
    assert run.info.master == "a/0" and run.info.epoch == 1
    assert any(isinstance(f, QueueRoot) for f in fx)
    assert election.elect_late(state, 4.0 + grace) == []  # once


def test_a_joiner_decides_no_election_until_its_view_is_whole() -> None:
    """A restarted peer learns runs and deaths by gossip before its state sync: a master it
    has not heard of is not taken for dead, and it elects nobody until it is settled (one
    took a run over from a live master so, and the run stalled under two masters)."""
    state = make_state("a/0", ("c/0",))
    known_run(state, info(master="b/0"))  # b/0: a master this peer has not heard of yet
    assert election.elect(state, 1.0) == []
    assert election.elect_late(state, 1.0 + state.cfg.ft.takeover_grace_s) == []
    state.settled = False
    known_run(state, info("r2", master="c/0"))
    declare(state, "c/0", State.DEAD)
    assert election.elect(state, 2.0) == []  # not settled: the others decide
    state.settled = True
    fx = election.elect(state, 3.0)
    assert state.runs.active["r2"].info.master == "a/0"
    assert any(isinstance(f, QueueRoot) for f in fx)


def _gossiping(me: str, plugins: dict[str, dict[str, str]]) -> PeerState:
    """A state whose members gossiped these plugin lists (name -> code hash, or unmet)."""

    def with_plugins(name: str) -> Member:
        return dataclasses.replace(member(name), plugins=plugins.get(name, {}))

    table = MemberTable(with_plugins(me))
    table.add_known([with_plugins(n) for n in ("a/0", "b/0", "c/0") if n != me])
    state = PeerState(me, "c0", Config(), table, dict(PLUGINS))
    state.settled = True
    return state


def test_the_election_passes_over_a_member_that_cannot_run_the_run() -> None:
    # a/0 is the smallest name, but it lacks the plugin's requirements: b/0 takes over.
    gossip = {
        "a/0": {"fib": "unmet:numpy>=1.26 (not installed)"},
        "b/0": {"fib": FIB.code_hash},
        "c/0": {"fib": FIB.code_hash},
    }
    a = _gossiping("a/0", gossip)
    run_a = known_run(a, info(master="c/0"))
    declare(a, "c/0", State.DEAD)
    assert election.elect(a, 3.0) == [] and run_a.info.master == "c/0"
    b = _gossiping("b/0", gossip)
    run_b = known_run(b, info(master="c/0"))
    declare(b, "c/0", State.DEAD)
    assert election.elect(b, 3.0) and run_b.info.master == "b/0" and run_b.info.epoch == 1


def test_a_member_with_another_version_refuses_a_submission_as_a_version_mismatch() -> None:
    # Its own type on the wire: the client says "fix the plugin directories" (exit 2), not
    # "try again" as for a draining peer.
    gossip = {"a/0": {"fib": FIB.code_hash}, "b/0": {"fib": "0" * 64}, "c/0": {}}
    a = _gossiping("a/0", gossip)
    with pytest.raises(VersionMismatch, match="peer b/0 has fib with code hash 000000000000"):
        admission.check_submission(a, m.Submit(1, "fib", ["10"], FIB.code_hash))
    assert error_info(VersionMismatch("x")).type == VERSION_MISMATCH  # what the client reads


# -- a run's elapsed time across masters ------------------------------------------------------


def _started_on_a(offset: float) -> tuple[PeerState, m.RunAnnounce]:
    """a/0 masters run-0, submitted at its clock's 1.0: its wall clock reads ``offset`` more
    (peers' trio clocks start anywhere; their wall clocks agree)."""
    a = make_state("a/0", ("b/0", "c/0"))
    a.wall_offset = offset
    _with_plugins(a, "b/0", "c/0")
    msg = m.Submit(7, "fib", ["12"], FIB.code_hash)
    parsed = hooks.parse_submission(FIB, msg.argv, a.cfg.net.max_frame_bytes)
    fx = master.submit(a, FakeLink("client~1", role="client"), msg, parsed, 1.0)
    (announce,) = [f.item for f in fx if isinstance(f, Spread)]
    assert isinstance(announce, m.RunAnnounce)
    assert announce.info.started_at == offset + 1.0
    return a, announce


def _finished_on(state: PeerState, at: float) -> float:
    run = state.runs.active["run-0"]
    assert run.root is not None and run.info.master == state.name
    run.root.value = Encoded(codec.encode_value(144))
    master.finish(state, "run-0", [], at)
    return state.runs.finished["run-0"].result.elapsed_s


def test_a_run_taken_over_after_its_master_is_lost_counts_its_time_from_its_first_start() -> None:
    # a/0 starts the run at wall 1001.0 and is lost; b/0, whose trio clock reads 4000 less,
    # takes it over at wall 1025.0 and ends it at wall 1031.8: 30.8 s, not its own 6.8 s.
    _, announce = _started_on_a(1000.0)
    b = make_state("b/0", ("a/0", "c/0"))
    b.wall_offset = 5000.0
    lifecycle.on_announces(b, [announce], -3998.0)
    restart.on_member_change(b, gone(b, "a/0"), -3975.0)
    run = b.runs.active["run-0"]
    assert run.info.master == "b/0" and run.info.started_at == 1001.0
    assert _finished_on(b, -3968.2) == pytest.approx(30.8)


def test_a_run_handed_over_by_a_draining_master_counts_its_time_from_its_first_start() -> None:
    a, announce = _started_on_a(0.0)
    run = a.runs.active["run-0"]
    assert run.root is not None
    drain.start(a, "asked")
    assert drain.hand_over_runs(a) == [ToCompute(Orphaned(run.root))]
    (handed,) = drain.root_dropped(a, run.root, 24.0)  # the heir is b/0
    assert isinstance(handed, Send) and isinstance(handed.msg, m.HandOver)
    b = make_state("b/0", ("a/0", "c/0"))
    lifecycle.on_announces(b, [announce], 1.5)
    drain.on_hand_over(b, handed.msg, 24.1)
    assert b.runs.active["run-0"].info.master == "b/0"
    assert _finished_on(b, 30.8) == pytest.approx(29.8)  # from a/0's start at 1.0


def test_a_resumed_run_counts_its_time_from_the_resume() -> None:
    # The time a run lay suspended (or lost with every machine) is not the run's.
    state = make_state()
    old = dataclasses.replace(info(master="z/9"), started_at=-500.0)
    master.resume(state, FakeLink("client~1", role="client"), 3, old, [], 5.0)
    run = state.runs.active["r1"]
    assert run.info.started_at == 5.0 and run.elapsed(9.0) == 4.0


def _restarted(me: str = "a/0#2") -> PeerState:
    """The new instance of a/0 (its predecessor a/0#1 dead), b/0 alive, settled."""
    table = MemberTable(Member(me, Address("10.0.0.1", 7000), "c0", instance=2))
    table.add_known([member("b/0")])
    state = PeerState(me, "c0", Config(), table, dict(PLUGINS))
    state.settled = True
    old = Member("a/0#1", Address("10.0.0.1", 7000), "c0", state=State.DEAD, instance=1)
    state.table.apply(old.update(State.DEAD, origin="b/0"))
    assert state.table.newest_in("a/0") is not None
    return state


def test_a_restarted_master_takes_over_its_predecessors_run_soon_after_it_learns_it() -> None:
    """The daemon restarts a lost master in its slot; the new instance has the smallest name,
    so the election names it before it knows the run. It takes the run over
    ft.replaced_grace_s after the run's news, woken by a timer, not ft.takeover_grace_s (the
    grace for deaths a peer resumed from a pause may imagine): its predecessor is dead for
    certain, a newer instance runs in its slot."""
    state = _restarted()
    fx = handle(state, RunsHeard([m.RunAnnounce(info(master="a/0#1"), "running")]), 5.0)
    wait = state.cfg.ft.replaced_grace_s
    assert wait < state.cfg.ft.takeover_grace_s
    [timer] = [f for f in fx if isinstance(f, Timer)]
    assert timer.event == ElectAgain() and wait <= timer.delay < 2 * wait
    assert not any(isinstance(f, QueueRoot) for f in fx)
    fx = timers.fire(state, timer.event, 5.0 + timer.delay)
    run = state.runs.active["r1"]
    assert run.info.master == "a/0#2" and run.info.epoch == 1
    assert any(isinstance(f, QueueRoot) for f in fx)


def test_a_takeover_made_before_the_restart_is_not_taken_over_again() -> None:
    """The restart was slower than the death's detection: b/0 took the run over (epoch 1)
    before a/0#2 appeared, and a/0#2's first news of the run predates it. The takeover's
    news comes within the short wait, and a/0#2 leaves the run to b/0 (taking it over too,
    at the same epoch with a smaller name, would win and throw b/0's progress away)."""
    state = _restarted()
    fx = handle(state, RunsHeard([m.RunAnnounce(info(master="a/0#1"), "running")]), 5.0)
    [timer] = [f for f in fx if isinstance(f, Timer)]
    handle(state, RunsHeard([m.RunAnnounce(info(master="b/0", epoch=1), "running")]), 5.2)
    assert not any(isinstance(f, QueueRoot) for f in timers.fire(state, timer.event, 6.5))
    assert state.runs.active["r1"].info.master == "b/0"


def test_a_run_whose_master_was_only_declared_dead_still_waits_for_the_grace() -> None:
    state = make_state("a/0", ("b/0",))
    declare(state, "b/0", State.DEAD)
    fx = handle(state, RunsHeard([m.RunAnnounce(info(master="b/0"), "running")]), 5.0)
    assert not any(isinstance(f, QueueRoot) for f in fx)
    assert state.runs.active["r1"].info.master == "b/0"
    grace = state.cfg.ft.takeover_grace_s
    assert any(isinstance(f, QueueRoot) for f in election.elect_late(state, 5.0 + grace))


def test_a_takeover_hears_the_run_ended_under_its_first_master_and_stops() -> None:
    """The two sides of a partition: b/0 took the run over (epoch 1) while its first master
    a/0, on the other side, went on and finished it (epoch 0). Once they meet, b/0 drops its
    epoch instead of computing the run again to the end. A suspension at an older epoch is
    not such news: a resume superseded it."""
    state = make_state("b/0", ("a/0", "c/0"))
    run = known_run(state, info(master="b/0", epoch=1))
    suspended = m.RunAnnounce(info(master="a/0", epoch=0), "suspended")
    assert lifecycle.on_announces(state, [suspended], 5.0) == []
    assert state.runs.active["r1"] is run
    done = m.RunAnnounce(info(master="a/0", epoch=0), "done")
    fx = lifecycle.on_announces(state, [done], 9.0)
    assert "r1" not in state.runs.active and run.state.aborted
    assert state.runs.status_of("r1") == "done" and state.runs.master_of("r1", "b/0") == "a/0"
    assert Spread(done) in fx
