"""The master's decisions as case tables: submit, queue, finish, suspend, resume."""

from __future__ import annotations

import dataclasses

import pytest

from satind import files
from satind.core import admission, lifecycle, master
from satind.core.effects import Log, QueueRoot, Reply, Send, Spread, Task, WakeWaiters
from satind.core.runs import RunRefused
from satind.net import codec
from satind.net import messages as m
from satind.net.codec import Encoded
from satind.plugin import hooks
from satind.work.jobs import UNSET
from tests.core.support import FIB, FakeLink, info, known_run, make_state


def _submit(state: object, link: FakeLink, argv: tuple[str, ...] = ("12",)) -> list[object]:
    from satind.core.state import PeerState

    assert isinstance(state, PeerState)
    msg = m.Submit(7, "fib", list(argv), FIB.code_hash)
    parsed = hooks.parse_submission(FIB, msg.argv, state.cfg.net.max_frame_bytes)
    return list(master.submit(state, link, msg, parsed, 1.0))


def test_a_submission_starts_a_run_and_tells_the_client_where_else_to_ask() -> None:
    state = make_state()
    link = FakeLink("client~1", role="client")
    fx = _submit(state, link)
    reply = fx[0]
    assert isinstance(reply, Reply) and isinstance(reply.msg, m.Submitted)
    assert reply.msg.run_id == "run-0" and reply.msg.error is None
    members = [state.table.get(n) for n in ("b/0", "c/0")]
    assert sorted(reply.msg.contacts) == sorted(str(mem.address) for mem in members if mem)
    run = state.runs.active["run-0"]
    assert run.submitter == "client~1" and run.info.master == "a/0"
    assert Log("run", m.RunAnnounce(run.info, "running")) in fx
    assert Spread(m.RunAnnounce(run.info, "running")) in fx
    assert [f.dest for f in fx if isinstance(f, Send)] == ["b/0", "c/0"]
    roots = [f for f in fx if isinstance(f, QueueRoot)]
    assert len(roots) == 1 and roots[0].job.args == FIB.parse_args(["12"])


def test_a_refused_submission_says_why() -> None:
    state = make_state()
    link = FakeLink("client~1", role="client")
    msg = m.Submit(7, "fib", ["x"], FIB.code_hash)
    with pytest.raises(Exception) as caught:
        hooks.parse_submission(FIB, msg.argv, state.cfg.net.max_frame_bytes)
    assert isinstance(caught.value, Exception)
    fx = master.submit(state, link, msg, caught.value, 1.0)
    assert len(fx) == 1 and isinstance(fx[0], Reply) and isinstance(fx[0].msg, m.Submitted)
    assert fx[0].msg.error is not None and "usage" in fx[0].msg.error.message


def test_a_submission_whose_parse_needs_a_file_asks_the_client_for_it() -> None:
    from satind_plugins import sat

    state = make_state()
    link = FakeLink("client~1", role="client")
    msg = m.Submit(7, "sat", ["/etc/passwd"], sat.PLUGIN.code_hash)
    with pytest.raises(files.InputNeeded) as needed:
        hooks.parse_submission(sat.PLUGIN, msg.argv, 1 << 20)
    fx = master.submit(state, link, msg, needed.value, 1.0)
    assert len(fx) == 1 and isinstance(fx[0], Reply) and isinstance(fx[0].msg, m.Submitted)
    assert fx[0].msg.needs == ["/etc/passwd"] and fx[0].msg.run_id == ""
    assert fx[0].msg.error is not None and fx[0].msg.error.type.endswith("InputNeeded")
    # Sent with the submission again: parsed from what the client sent.
    sent = {"/etc/passwd": b"p cnf 1 1\n1 0\n"}
    parsed = hooks.parse_submission(sat.PLUGIN, msg.argv, 1 << 20, sent)
    assert parsed.args[0] == ((1,),)


def test_runs_past_max_concurrent_wait_in_the_masters_queue() -> None:
    state = make_state()
    state.cfg = dataclasses.replace(
        state.cfg, run=dataclasses.replace(state.cfg.run, max_concurrent=1)
    )
    link = FakeLink("client~1", role="client")
    _submit(state, link)
    fx = _submit(state, link)
    assert not any(isinstance(f, QueueRoot) for f in fx)
    assert [r.info.run_id for r in state.runs.queue] == ["run-1"]


def test_a_draining_peer_takes_no_run() -> None:
    state = make_state()
    state.draining = True
    with pytest.raises(RunRefused, match="draining"):
        admission.check_submission(state, m.Submit(1, "fib", ["5"], FIB.code_hash))


def test_the_end_of_a_run_sums_the_shares_and_starts_the_next() -> None:
    state = make_state()
    state.cfg = dataclasses.replace(
        state.cfg, run=dataclasses.replace(state.cfg.run, max_concurrent=1)
    )
    link = FakeLink("client~1", role="client")
    _submit(state, link)
    _submit(state, link)
    run = state.runs.active["run-0"]
    assert run.root is not None
    run.root.value = Encoded(codec.encode_value(144))
    run.state.spawns = 10
    run.departed = {"spawns": 5.0}  # a peer that drained meanwhile
    fx = master.finish(state, "run-0", [{"spawns": 7.0}], 4.0)
    result = state.runs.finished["run-0"].result
    assert codec.decode_value(result.value or b"") == 144 and result.stats["spawns"] == 22
    assert Send("client~1", result) in fx and WakeWaiters("run-0") in fx
    assert "run-0" not in state.runs.active and "run-1" in state.runs.active
    assert any(isinstance(f, QueueRoot) for f in fx)
    assert master.lookup_result(state, "run-0") == (result, "", False)


def test_a_result_too_large_for_a_message_fails_the_run() -> None:
    state = make_state()
    _submit(state, FakeLink("client~1", role="client"))
    run = state.runs.active["run-0"]
    assert run.root is not None
    run.root.value = UNSET
    run.root.exc = codec.EncodeError("a bytes of 70,000,000 bytes ... net.max_frame_bytes")
    master.finish(state, "run-0", [], 4.0)
    error = state.runs.finished["run-0"].result.error
    assert error is not None and "net.max_frame_bytes" in error.message


def test_suspend_needs_the_master_and_tells_the_submitter() -> None:
    state = make_state()
    known_run(state, info(master="b/0"))
    with pytest.raises(RunRefused, match="its master is b/0"):
        master.suspend(state, "r1", 1.0)
    _submit(state, FakeLink("client~1", role="client"))
    fx = master.suspend(state, "run-0", 3.0)
    told = [f for f in fx if isinstance(f, Send) and f.dest == "client~1"]
    assert len(told) == 1 and isinstance(told[0].msg, m.RunResult)
    assert told[0].msg.error is not None and told[0].msg.error.type == "RunSuspended"
    assert state.runs.suspended == {"run-0": 0} and state.runs.status_of("run-0") == "suspended"


def test_resume_keeps_the_checkpointed_results_and_respawns_under_a_new_epoch() -> None:
    state = make_state()
    link = FakeLink("client~1", role="client")
    kept = m.JobResult("r1", b"\x01", codec.encode_value(55), None)
    fx = master.resume(state, link, 3, info(master="z/9", epoch=2), [kept], 5.0)
    run = state.runs.active["r1"]
    assert run.info.master == "a/0" and run.info.epoch == 3
    assert run.state.orphans == {b"\x01": "a/0"} and state.orphans.kept_result(("r1", b"\x01"))
    roots = [f for f in fx if isinstance(f, QueueRoot)]
    assert len(roots) == 1 and isinstance(roots[0].job.args, Encoded)
    replies = [f for f in fx if isinstance(f, Reply)]
    assert isinstance(replies[0].msg, m.Submitted) and replies[0].msg.run_id == "r1"


def test_a_run_that_is_running_or_over_is_not_resumed() -> None:
    state = make_state()
    link = FakeLink("client~1", role="client")
    known_run(state)
    fx = master.resume(state, link, 3, info(), [], 5.0)
    assert isinstance(fx[0], Reply) and isinstance(fx[0].msg, m.Submitted)
    assert fx[0].msg.error is not None and "running already" in fx[0].msg.error.message


def test_cancel_drops_a_running_run_everywhere_and_tells_the_submitter() -> None:
    state = make_state()
    known_run(state, info(master="b/0"))
    with pytest.raises(RunRefused, match="its master is b/0"):
        master.cancel(state, "r1", 1.0)
    _submit(state, FakeLink("client~1", role="client"))
    run = state.runs.active["run-0"]
    fx = master.cancel(state, "run-0", 3.0)
    told = [f for f in fx if isinstance(f, Send) and f.dest == "client~1"]
    assert len(told) == 1 and isinstance(told[0].msg, m.RunResult)
    assert told[0].msg.error is not None and told[0].msg.error.type == "RunCancelled"
    # Dropped here (its frames unwind, nothing kept or logged), announced, final in the log.
    assert run.state.aborted and "run-0" not in state.runs.active
    ends = [
        f.item
        for f in fx
        if isinstance(f, Spread)
        and isinstance(f.item, m.RunAnnounce)
        and f.item.state == "cancelled"
    ]
    assert len(ends) == 1 and Log("end", ends[0]) in fx
    assert WakeWaiters("run-0") in fx and "run-0" not in state.runs.suspended
    # `satind result` says why; a second cancel says it is over.
    result, _why, pending = master.lookup_result(state, "run-0")
    assert result is not None and result.error is not None and not pending
    assert result.error.type == "RunCancelled"
    with pytest.raises(RunRefused, match="is over"):
        master.cancel(state, "run-0", 4.0)
    assert state.runs.ends == {"runs_cancelled": 1}  # satind_runs_cancelled_total


def test_cancel_takes_a_queued_run_out_of_the_masters_queue() -> None:
    state = make_state()
    state.cfg = dataclasses.replace(
        state.cfg, run=dataclasses.replace(state.cfg.run, max_concurrent=1)
    )
    link = FakeLink("client~1", role="client")
    _submit(state, link)
    _submit(state, link)
    fx = master.cancel(state, "run-1", 2.0)
    assert not state.runs.queue and state.runs.status_of("run-1") == "cancelled"
    assert not any(isinstance(f, QueueRoot) for f in fx)  # the running one goes on
    assert state.runs.status_of("run-0") == "running"


def test_a_finished_result_is_copied_to_other_members_who_answer_for_it() -> None:
    state = make_state(others=("b/0", "c/0", "d/0", "e/0"))
    _submit(state, FakeLink("client~1", role="client"))
    run = state.runs.active["run-0"]
    assert run.root is not None
    run.root.value = Encoded(codec.encode_value(55))
    fx = master.finish(state, "run-0", [], 4.0)
    assert state.runs.ends == {"runs_done": 1}  # satind_runs_done_total
    copies = [f for f in fx if isinstance(f, Send) and isinstance(f.msg, m.ResultCopy)]
    assert len(copies) == state.cfg.run.result_copies == 2
    assert len({f.dest for f in copies}) == 2 and "a/0" not in {f.dest for f in copies}
    copy = copies[0].msg
    assert isinstance(copy, m.ResultCopy) and copy.state == "done" and copy.info.args == b""
    # A member that still tracked the run (the end's news not here yet) takes the copy as
    # that news: it drops the run, and answers for the result.
    other = make_state("b/0", ("a/0", "c/0"))
    live = known_run(other, dataclasses.replace(run.info, run_id="run-0"))
    got = master.on_result_copy(other, copy, 5.0)
    assert live.state.aborted and "run-0" not in other.runs.active
    assert WakeWaiters("run-0") in got
    result, _why, pending = master.lookup_result(other, "run-0")
    assert result == copy.result and not pending
    assert other.runs.status_of("run-0") == "done"


@pytest.mark.parametrize("news", ["running", "done"])
def test_a_queued_run_another_master_took_over_answers_its_submitter_through_this_peer(
    news: str,
) -> None:
    """This master was paused (a SIGSTOPped machine) with a run queued behind another
    (run.max_concurrent): the others took it for dead and b/0 started the queued run. When
    this peer hears of it — running there, or already over — the run leaves its queue (it
    must not start it once more) and its submitter, still waiting here, is sent b/0's result
    (issue 45: 5 of 5 such clients were never answered)."""
    state = make_state()
    state.cfg = dataclasses.replace(
        state.cfg, run=dataclasses.replace(state.cfg.run, max_concurrent=1)
    )
    link = FakeLink("client~1", role="client")
    _submit(state, link)
    _submit(state, link)
    queued = state.runs.queue[0].info
    assert queued.run_id == "run-1"
    taken = dataclasses.replace(queued, master="b/0", epoch=queued.epoch + 1)
    fx = lifecycle.on_announces(state, [m.RunAnnounce(taken, news)], 3.0)
    assert not state.runs.queue
    assert Task("forward_result", "run-1", "client~1") in fx
    # The running one goes on here; when it ends, the taken one does not start here.
    assert state.runs.status_of("run-0") == "running"
    root = state.runs.active["run-0"].root
    assert root is not None
    root.value = Encoded(codec.encode_value(144))
    fx = master.finish(state, "run-0", [], 4.0)
    assert not any(isinstance(f, QueueRoot) for f in fx)
