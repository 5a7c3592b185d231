"""Abort across peers (core/aborts.py): event in, effects out. The victim tells the thieves of
an aborted frame's children; a thief drops or cuts the job, forwards the abort down its own
custody, and sends no result; nothing aborted is restarted."""

from __future__ import annotations

from satind.core import aborts, custody, thief, victim
from satind.core.effects import Reply, Send, ToCompute
from satind.core.restart import restart_jobs_of
from satind.engine.frames import Cancel, JobArrived, make_root
from satind.net import messages as m
from satind.work.jobs import Job
from tests.core.support import FakeLink, job_of, known_run, make_state


def _frame_with_children(state, n: int = 3):  # type: ignore[no-untyped-def]
    run = known_run(state)
    frame = make_root(job_of(run.state).fn, (12,), run.state)
    kids = [Job(frame.fn, (i,), frame, i, run.state, 0.25) for i in range(n)]
    frame.nspawn = frame.pending = n
    return run, frame, kids


def _give(state, job: Job, thief_name: str) -> None:  # type: ignore[no-untyped-def]
    state.custody.give((job.run.run_id, job.path), job, thief_name, 0.0)


def test_an_aborted_frames_stolen_children_get_an_abort_and_are_never_restarted() -> None:
    state = make_state()
    run, frame, kids = _frame_with_children(state)
    _give(state, kids[0], "b/0")
    _give(state, kids[1], "c/0")
    other = job_of(run.state, (3,), index=9)  # not a child of the frame
    _give(state, other, "b/0")
    frame.aborted_below = 3
    fx = aborts.children_aborted(state, frame)
    assert fx == [
        Send("b/0", m.Abort("r1", kids[0].path)),
        Send("c/0", m.Abort("r1", kids[1].path)),
    ]
    assert state.abort_messages == 2
    assert list(state.custody.given) == [("r1", other.path)]
    # The thief dies after the abort: only the unrelated job comes back.
    back = restart_jobs_of(state, "b/0", "gone")
    assert [e.event for e in back if isinstance(e, ToCompute)] == [
        JobArrived(other, restarted=True)
    ]
    # A late result of an aborted child finds no record and is ignored.
    late = m.JobResult("r1", kids[1].path, b"\x01", None)
    assert custody.on_job_result(state, "c/0", late, 1.0) == []


def test_a_steal_never_hands_out_a_child_its_parent_aborted() -> None:
    state = make_state()
    _, frame, kids = _frame_with_children(state, 2)
    for kid in kids:
        state.queue.push(kid)
    frame.aborted_below = 2  # the compute side aborted while a thief's request was on its way
    link = FakeLink("b/0")
    fx = victim.on_steal_request(state, link, m.StealRequest(1, False, False, ""), 0.0)
    assert [type(e).__name__ for e in fx] == ["Reply"] and not state.custody.given


def _stolen(state, victim_name: str = "b/0") -> Job:  # type: ignore[no-untyped-def]
    run = known_run(state)
    job = job_of(run.state, (20,), index=4)
    job.origin = victim_name
    state.custody.take((job.run.run_id, job.path), victim_name, job)
    return job


def test_a_thief_drops_an_aborted_job_still_queued_and_sends_nothing() -> None:
    state = make_state()
    job = _stolen(state)
    state.queue.push(job)
    fx = aborts.on_abort(state, "b/0", m.Abort("r1", job.path))
    assert fx == [] and len(state.queue) == 0 and not state.custody.taken
    assert isinstance(job.error, Exception) and job.run.jobs_cancelled == 1
    # Asked about it later, it is unknown here.
    answer = custody.on_job_query(state, FakeLink("b/0"), m.JobQuery("r1", job.path))
    assert answer[0].msg == m.JobState("r1", job.path, "unknown")  # type: ignore[union-attr]


def test_a_thief_cuts_a_running_aborted_job_and_forwards_the_abort_down_its_custody() -> None:
    state = make_state(others=("b/0", "c/0", "d/0"))
    job = _stolen(state)
    child = Job(job.fn, (19,), job, 0, job.run, 0.1)
    grandchild = Job(job.fn, (18,), child, 1, job.run, 0.1)
    unrelated = job_of(job.run, (3,), index=7)
    _give(state, child, "c/0")
    _give(state, grandchild, "d/0")
    _give(state, unrelated, "d/0")
    fx = aborts.on_abort(state, "b/0", m.Abort("r1", job.path))
    assert fx[0] == ToCompute(Cancel(job))
    assert sorted((e.dest, e.msg) for e in fx[1:] if isinstance(e, Send)) == sorted(
        [("c/0", m.Abort("r1", child.path)), ("d/0", m.Abort("r1", grandchild.path))],
        key=lambda pair: pair[0],
    )
    assert list(state.custody.given) == [("r1", unrelated.path)]
    # Until the compute side has unwound it, nothing of its subtree is handed out ...
    state.queue.push(Job(job.fn, (1,), child, 2, job.run, 0.1))
    link = FakeLink("c/0")
    fx = victim.on_steal_request(state, link, m.StealRequest(1, False, False, ""), 0.0)
    assert fx == [Reply(link, m.StealReply(1, None, None))] and len(state.custody.given) == 1
    # ... and if it finished before the cut reached it, its result is not sent.
    job.value = b"x"
    assert [e for e in thief.job_finished(state, job) if isinstance(e, Send)] == []
    assert not state.cancelled


def test_an_abort_from_another_victim_or_for_an_unknown_job_does_nothing() -> None:
    state = make_state()
    job = _stolen(state, "b/0")
    assert aborts.on_abort(state, "c/0", m.Abort("r1", job.path)) == []
    assert aborts.on_abort(state, "b/0", m.Abort("r1", b"\x7f")) == []
    assert state.custody.taken
