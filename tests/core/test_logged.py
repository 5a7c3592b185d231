"""Reusing a lost member's checkpoint log (core/logged.py; issue 31), as case tables: with
checkpoints on, the jobs a lost member took wait for its log; what the log held is kept as
orphans, a job whose own result was logged is answered at once, the others restart."""

from __future__ import annotations

from satind.core import logged, restart
from satind.core.effects import ReadLog, Spread, ToCompute
from satind.core.logged import LogRead, keepers
from satind.engine.frames import JobArrived
from satind.net import codec
from satind.net import messages as m
from satind.work.events import ChildResult
from tests.core.support import gone, info, job_of, known_run, make_state


def test_without_checkpoints_the_jobs_restart_at_once() -> None:
    state = make_state()
    run = known_run(state, info(master="c/0"))
    job = job_of(run.state, parent=job_of(run.state), index=1)
    state.custody.give(("r1", job.path), job, "b/0", 0.0)
    fx = restart.on_member_change(state, gone(state, "b/0"), 1.0)
    assert ToCompute(JobArrived(job, restarted=True)) in fx
    assert not any(isinstance(f, ReadLog) for f in fx)


def test_with_checkpoints_the_jobs_wait_for_the_lost_members_log() -> None:
    state = make_state(others=("b/0", "c/0", "d/0"))
    state.checkpoint.enabled = True
    run = known_run(state, info(master="c/0"))
    root = job_of(run.state)
    done = job_of(run.state, parent=root, index=1)  # its own result was logged
    open_ = job_of(run.state, parent=root, index=2)  # a child of it was logged
    for job in (done, open_):
        state.custody.give(("r1", job.path), job, "b/0", 0.0)
    fx = restart.on_member_change(state, gone(state, "b/0"), 1.0)
    reads = [f for f in fx if isinstance(f, ReadLog)]
    assert not any(isinstance(f, ToCompute) and isinstance(f.event, JobArrived) for f in fx)
    assert len(reads) == 1 and reads[0].peer == "b/0"
    assert set(reads[0].wanted) == {("r1", done.path), ("r1", open_.path)}
    # b/0's copies are kept on the next member after it, not on itself.
    assert reads[0].keepers == ("c/0",)

    value = codec.encode_value(8)
    child = open_.path + b"\x03"
    results = [
        m.JobResult("r1", done.path, value, None),
        m.JobResult("r1", child, value, None),
        m.JobResult("r-other", b"\x09", value, None),  # a run this peer does not know
    ]
    fx = logged.on_read(state, LogRead(reads[0].token, "b/0", results, "dir"))
    assert state.orphans.counters.results_from_logs == 2
    assert Spread(m.OrphanTuple("r1", child, "a/0")) in fx
    answered = [f.event for f in fx if isinstance(f, ToCompute)]
    assert any(isinstance(e, ChildResult) and e.job is done for e in answered)
    assert JobArrived(open_, restarted=True) in answered
    assert run.state.orphans is not None and run.state.orphans[child] == "a/0"
    assert not state.reading_logs


def test_a_log_that_could_not_be_read_still_restarts_the_jobs() -> None:
    state = make_state()
    state.checkpoint.enabled = True
    run = known_run(state, info(master="c/0"))
    job = job_of(run.state, parent=job_of(run.state), index=1)
    state.custody.give(("r1", job.path), job, "b/0", 0.0)
    (read,) = [
        f
        for f in restart.on_member_change(state, gone(state, "b/0"), 1.0)
        if isinstance(f, ReadLog)
    ]
    fx = logged.on_read(state, LogRead(read.token, "b/0", (), error="not read in time"))
    assert fx == [ToCompute(JobArrived(job, restarted=True))]


def test_keepers_are_on_other_machines_only() -> None:
    state = make_state("m1/0", others=("m1/1", "m2/0", "m3/0"))
    assert keepers(state, "m1/1") == ("m2/0",)
    assert keepers(state, "m3/0") == ("m1/0",)
    alone = make_state("m1/0", others=("m1/1",))
    assert keepers(alone, "m1/0") == ()  # one machine: its peers share its directory


def test_a_new_master_respawns_the_root_once_the_logs_are_read() -> None:
    from satind.core import election
    from satind.core.effects import QueueRoot

    state = make_state()
    state.checkpoint.enabled = True
    run = known_run(state, info(master="b/0"))
    fx = election.take_over(state, run, 1.0, lost="b/0")
    (read,) = [f for f in fx if isinstance(f, ReadLog)]
    assert run.root is not None
    assert not any(isinstance(f, QueueRoot) for f in fx)
    assert read.peer == "b/0" and read.wanted == (("r1", run.root.path),)
    below = run.root.path + b"\x02"
    result = m.JobResult("r1", below, codec.encode_value(3), None)
    fx = logged.on_read(state, LogRead(read.token, "b/0", [result], "dir"))
    assert QueueRoot(run.root) in fx
    assert run.state.orphans is not None and run.state.orphans[below] == "a/0"
    # A hand-over is no loss: the heir has the results, the root goes at once.
    other = make_state()
    other.checkpoint.enabled = True
    handed = known_run(other, info(master="b/0"))
    fx = election.take_over(other, handed, 1.0, "its master b/0 drains")
    assert any(isinstance(f, QueueRoot) for f in fx)
