"""The master's scheduler of iterative runs (scheduling-iterative-apps-volatile-resources §6;
the plugin side is satind/iterative.py, the heuristics satind/volatile/heuristics.py).

* **Tasks are pushed, not stolen.** The run's root pushes each iteration's tasks
  (``Spawnable.push``); they come here instead of the work queue. Every ``iterative.slot_s``
  (and whenever a task comes, arrives or ends) the scheduler plans the tasks not placed over
  the UP workers with the run's heuristic and sends each worker it chose and that can take
  one now a ``TaskPush``: a worker holds at most one task beyond the one it computes and
  receives one at a time, and at most ``n_com`` pushes are in transfer at once (a push's
  transfer ends with the worker's ``TaskAck``). Custody (core/custody.py) keeps the record,
  so results, lost workers and aborts work as for stolen jobs; a worker's jobs of a pushed
  run are never stolen on.
* **Workers' states** come from membership: an alive member is UP, a reclaimed one
  RECLAIMED (``satind reclaim``), a dead or departed one DOWN. Once per slot each worker's
  state is observed into its availability estimator (volatile/model.py); a worker's speed is
  the mean time its tasks took, its Delay what its held tasks still need.
* **Replicas**: when UP workers outnumber the run's tasks left, idle workers get copies of
  unfinished tasks (at most ``replicas`` extra); the first result is applied, the other
  holders get an ``Abort``.
* **Barriers**: at each barrier the root sends its state here; it goes to every member
  (``Barrier``), so that a new master (election) resumes the run from the last barrier instead
  of from its start.
* The master is not a worker (the paper's master only schedules) unless it is alone.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from satind.core import kinds, sharing
from satind.core.effects import DEBUG, INFO, Effects, Log, Send, Timer, ToCompute
from satind.core.model import JobKey
from satind.core.model.iterative import WorkerView
from satind.core.model.timers import SchedulerTick
from satind.core.thief import accept_stolen
from satind.core.victim import job_spec, shared_ids
from satind.net import codec
from satind.net import messages as m
from satind.volatile.heuristics import Candidate, assignments
from satind.volatile.model import DOWN, RECLAIMED, UP
from satind.work.events import ChildResult, JobArrived
from satind.work.jobs import Job

if TYPE_CHECKING:
    from satind.core.state import PeerState


def task_ready(state: PeerState, job: Job, now: float) -> Effects:
    """Hook ``task_ready``: a task to place."""
    sched = state.iterative
    job.run.pushed = True
    if not state.others():
        return [ToCompute(JobArrived(job))]  # alone: the master computes (nobody else can)
    sched.pending.setdefault(job.run.run_id, deque()).append(job)
    return _tick_soon(state) + schedule(state, now)


def _tick_soon(state: PeerState) -> Effects:
    sched = state.iterative
    if sched.ticking:
        return []
    sched.ticking = True
    return [Timer(state.cfg.iterative.slot_s, SchedulerTick())]


def tick(state: PeerState, now: float) -> Effects:
    """Timer ``SchedulerTick``: a time slot of the scheduler, while it has tasks."""
    sched = state.iterative
    if not sched.pending and not sched.placed:
        sched.ticking = False
        return []
    observe(state)
    return [*schedule(state, now), Timer(state.cfg.iterative.slot_s, SchedulerTick())]


def observe(state: PeerState) -> None:
    """One slot: every known worker's state into its estimator."""
    sched = state.iterative
    for mem in state.table.everyone():
        if mem.name == state.name:
            continue
        view = sched.workers.setdefault(mem.name, WorkerView())
        if not mem.alive:
            view.state = DOWN
        elif mem.reclaimed:
            view.state = RECLAIMED
        else:
            view.state = UP
        view.estimator.observe(view.state)


# -- placing -------------------------------------------------------------------------------


def schedule(state: PeerState, now: float) -> Effects:
    """Place what can be placed now, run by run."""
    cfg = state.cfg.iterative
    sched = state.iterative
    fx: Effects = []
    alive = set(state.others())
    for name in alive:
        sched.workers.setdefault(name, WorkerView())
    for run_id in list(sched.pending):
        queue = sched.pending[run_id]
        if not queue:
            del sched.pending[run_id]
            continue
        free = cfg.n_com - sum(len(v.in_transfer) for v in sched.workers.values())
        refused = sched.refused.get(run_id, set())
        if alive <= refused:
            # Every other member takes no part in the run: the master computes its tasks,
            # as it does alone (else the run would wait for ever).
            fx += [ToCompute(JobArrived(job)) for job in queue]
            del sched.pending[run_id]
            continue
        ups = sorted(
            n
            for n in alive
            if sched.workers[n].state != RECLAIMED and not _draining(state, n) and n not in refused
        )
        if free <= 0 or not ups:
            continue
        # One task beyond the one it computes, and one transfer at a time on its link.
        ready = {
            n
            for n in ups
            if len(sched.workers[n].holding) <= 1 and not sched.workers[n].in_transfer
        }
        order = _plan(state, ups, len(queue), now, run_id)
        started: set[str] = set()
        for i in order:
            if free <= 0 or not queue or not (ready - started):
                break
            worker = ups[i]
            if worker in started or worker not in ready:
                continue
            started.add(worker)
            free -= 1
            fx += _push(state, queue.popleft(), worker, now)
    fx += _replicas(state, alive, now)
    return fx


def _replicas(state: PeerState, alive: set[str], now: float) -> Effects:
    """Copies of unfinished tasks for idle workers, when UP workers outnumber tasks left."""
    cfg = state.cfg.iterative
    sched = state.iterative
    if cfg.replicas <= 0 or any(sched.pending.values()):
        return []
    free = cfg.n_com - sum(len(v.in_transfer) for v in sched.workers.values())
    ups = [n for n in alive if sched.workers[n].state == UP and not _draining(state, n)]
    idle = sorted(n for n in ups if not sched.workers[n].holding)
    open_keys = [k for k, h in sched.holders.items() if 1 <= len(h) <= cfg.replicas]
    if len(ups) <= len(sched.placed):
        # Not more UP workers than tasks left: only tasks that no UP worker holds (their
        # holders are reclaimed) get copies — else the barrier waits for the owners' release.
        open_keys = [
            k for k in open_keys if all(sched.workers[h].state != UP for h in sched.holders[k])
        ]
    if free <= 0 or not idle or not open_keys:
        return []
    fx: Effects = []
    open_keys.sort(key=lambda k: (len(sched.holders[k]), k))
    order = _plan(state, idle, len(idle), now, open_keys[0][0])
    done: set[str] = set()
    for i in order:
        worker = idle[i]
        if free <= 0:
            break
        if worker in done:
            continue
        done.add(worker)
        open_keys.sort(key=lambda k: (len(sched.holders[k]), k))
        mine = [k for k in open_keys if worker not in sched.refused.get(k[0], ())]
        if not mine:
            continue  # it takes no part in those runs
        key = mine[0]
        if len(sched.holders[key]) > cfg.replicas:
            break
        free -= 1
        sched.counters.task_replicas += 1
        fx += _push(state, sched.placed[key], worker, now)
    return fx


def _push(state: PeerState, job: Job, worker: str, now: float) -> Effects:
    """Send ``job`` to ``worker`` (its arguments encoded here: tasks carry small inputs)."""
    run = state.runs.active.get(job.run.run_id)
    if run is None or job.run.aborted:
        return []
    key = (job.run.run_id, job.path)
    refs: list[Any] = []
    try:
        args = codec.encode_value(job.args, state.cfg.net.max_frame_bytes, refs)
    except codec.EncodeError as exc:
        return [ToCompute(ChildResult(job, None, exc))]  # its sync raises why

    spec = job_spec(run.info, job, args, shared_ids(refs), pushed=True)
    sched = state.iterative
    state.custody.give(key, job, worker, now)
    sched.placed[key] = job
    sched.holders.setdefault(key, set()).add(worker)
    view = sched.workers.setdefault(worker, WorkerView())
    view.holding[key] = now
    view.in_transfer.add(key)
    sched.counters.tasks_pushed += 1
    state.note(DEBUG, __name__, "pushed %s%s to %s", key[0], key[1].hex(), worker)
    return [Send(worker, m.TaskPush(spec))]


def _plan(
    state: PeerState, workers: list[str], tasks: int, now: float, run_id: str
) -> Iterator[int]:
    """The run's heuristic over ``workers``: the index in it of each task's worker, lazily."""
    cfg = state.cfg.iterative
    code = _program(state, run_id)
    return assignments(
        cfg.heuristic,
        [_candidate(state, i, n, now, code) for i, n in enumerate(workers)],
        tasks,
        _transfer_slots(state),
        cfg.n_com,
        state.iterative.rng,
    )


def _program(state: PeerState, run_id: str) -> str:
    """The run's shipped code version ("": installed, every member has it)."""
    run = state.runs.active.get(run_id)
    return run.info.code_hash if run is not None and run.info.shipped else ""


def _fetching(state: PeerState, view: WorkerView, code: str) -> bool:
    """Whether a task the worker holds waits for ``code`` there (it is fetching it)."""
    return any(_program(state, key[0]) == code for key in view.fetching)


def _candidate(state: PeerState, index: int, name: str, now: float, code: str) -> Candidate:
    """A worker for the heuristics, in slots: its speed, its Delay, its chain. A worker that
    lacks the run's shipped code (``code``) first receives it (the paper's T_prog): its Delay
    counts the code's bytes over the bandwidth from it, unless a task of it is fetching it
    already (then that task's time covers the rest)."""
    sched = state.iterative
    slot = state.cfg.iterative.slot_s
    view = sched.workers[name]
    known = [v.task_s for v in sched.workers.values() if v.task_s is not None]
    task_s = (
        view.task_s if view.task_s is not None else (sum(known) / len(known) if known else slot)
    )
    w = max(task_s / slot, 1.0)
    busy = 0.0
    if view.holding:
        oldest = min(view.holding.values())
        busy = max(len(view.holding) * task_s - (now - oldest), 0.0) / slot
    if code and code not in view.programs and not _fetching(state, view, code):
        bandwidth = state.table.bandwidth.get(name, state.cfg.iterative.bandwidth_bytes_s)
        busy += state.code_bytes.get(code, 0) / max(bandwidth, 1.0) / slot
    return Candidate(index, w, busy, view.estimator.chain())


def _transfer_slots(state: PeerState) -> float:
    """A task's transfer time in slots (the paper's T_data), from the transfers measured to
    the workers (their mean): at least one slot, the scheduler's grain."""
    known = [v.transfer_s for v in state.iterative.workers.values() if v.transfer_s is not None]
    if not known:
        return 1.0
    return max(1.0, sum(known) / len(known) / state.cfg.iterative.slot_s)


def _draining(state: PeerState, name: str) -> bool:
    mem = state.table.get(name)
    return mem is None or mem.draining


# -- what comes back -------------------------------------------------------------------------


def on_ack(state: PeerState, worker: str, msg: m.TaskAck, now: float) -> Effects:
    """A push arrived: its transfer is over, another may start; or the run's shipped code
    came to a worker that lacked it (the program's transfer is over)."""
    view = state.iterative.workers.get(worker)
    if view is not None:
        code = _program(state, msg.run_id)
        if view.arrived((msg.run_id, msg.path), now, code, msg.has_code):
            state.iterative.counters.program_transfers += 1
            state.note(INFO, __name__, "%s has run %s's shipped code now", worker, msg.run_id)
    return schedule(state, now)


def finished(state: PeerState, key: JobKey, thief: str, now: float) -> Effects:
    """The first result of a placed task came (custody applies it): the worker's speed, and
    the other copies are cancelled."""
    sched = state.iterative
    if sched.placed.pop(key, None) is None:
        return []
    fx: Effects = []
    for holder in sorted(sched.holders.pop(key, set())):
        view = sched.workers.get(holder)
        fetched = view is not None and key in view.fetching  # (the code's arrival unheard of)
        pushed = view.drop(key) if view is not None else None
        if holder == thief and view is not None and (code := _program(state, key[0])):
            view.programs.add(code)  # it computed the task: it has the code now
        if holder == thief and view is not None and pushed is not None and not fetched:
            # (A task whose code's arrival was not heard of would measure the fetch too.)
            took = now - pushed
            view.tasks_done += 1
            view.task_s = (
                took
                if view.task_s is None
                else view.task_s + (took - view.task_s) / view.tasks_done
            )
        elif holder != thief:
            fx.append(Send(holder, m.Abort(key[0], key[1])))
    return fx + schedule(state, now)


def lost(state: PeerState, job: Job, worker: str, why: str) -> Effects:
    """A task given to ``worker``, which is gone: placed again by the scheduler, unless
    another copy still runs."""
    if requeue(state, job, worker):
        state.steal.jobs_restarted += 1
        state.note(
            INFO,
            __name__,
            "placing %s%s again: %s is %s",
            job.run.run_id,
            job.path.hex(),
            worker,
            why,
        )
    return []


def taken_back(state: PeerState, job: Job, worker: str, now: float) -> Effects:
    """``worker`` does not have the task it was pushed. If the task had arrived there (its
    ack came), the worker takes no part in the run (it lacks the plugin, or does not accept or
    could not get the shipped code; it says why in its status): none of the run's tasks go
    there again. If not, the push was lost on the way. Either way the task is placed again."""
    view = state.iterative.workers.get(worker)
    key = (job.run.run_id, job.path)
    # Its ack came: the transfer is over, or the worker said it fetches the code.
    if (
        view is not None
        and key in view.holding
        and (key in view.fetching or key not in view.in_transfer)
    ):
        state.iterative.refused.setdefault(job.run.run_id, set()).add(worker)
        state.note(
            INFO, __name__, "%s takes no part in run %s: its tasks go elsewhere", worker, key[0]
        )
    requeue(state, job, worker)
    return _tick_soon(state) + schedule(state, now)


def requeue(state: PeerState, job: Job, worker: str) -> bool:
    """``worker`` is lost with its copy of ``job``: True when the job goes back to be placed
    again (no other copy runs)."""
    sched = state.iterative
    key = (job.run.run_id, job.path)
    holders = sched.holders.get(key, set())
    holders.discard(worker)
    view = sched.workers.get(worker)
    if view is not None:
        view.drop(key)
    if holders:
        return False
    sched.holders.pop(key, None)
    sched.placed.pop(key, None)
    sched.counters.tasks_requeued += 1
    sched.pending.setdefault(job.run.run_id, deque()).appendleft(job)
    return True


# -- barriers --------------------------------------------------------------------------------


def barrier(state: PeerState, run_id: str, iteration: int, data: bytes) -> Effects:
    """Hook ``barrier``: keep it, and send it to every member."""
    run = state.runs.active.get(run_id)
    epoch = run.info.epoch if run is not None else 0
    state.iterative.barriers[run_id] = (epoch, iteration, data)
    state.iterative.counters.barriers += 1
    msg = m.Barrier(run_id, epoch, iteration, data)
    # In the checkpoint log too (with a checkpoint directory): a resume after the loss of
    # every member starts from it, as a new master does from what the members keep.
    return [Log("barrier", msg), *(Send(peer, msg) for peer in state.others())]


def on_barrier(state: PeerState, msg: m.Barrier) -> Effects:
    """A master's barrier: kept (and logged) if it is the run's latest."""
    if state.iterative.keep_barrier(msg.run_id, msg.epoch, msg.iteration, msg.state):
        return [Log("barrier", msg)]
    return []


# -- the worker's side -------------------------------------------------------------------------


def on_push(state: PeerState, master: str, msg: m.TaskPush, now: float) -> Effects:
    """A task pushed to us: acknowledged at once, saying whether its run's shipped code is
    here (if not, the task waits for it: core/shipping.py), then run like a stolen job."""
    spec = msg.job
    has_code = not spec.shipped or state.plugin_version(spec.plugin, spec.code_hash) is not None
    fx: Effects = [Send(master, m.TaskAck(spec.run_id, spec.path, has_code))]
    job, more = accept_stolen(state, msg.job, master)
    fx += more
    if job is None:
        return fx
    job.run.pushed = True
    return fx + sharing.arrive(state, job, msg.job.shared, master, now)


def forget_run(state: PeerState, run_id: str) -> None:
    """A run is over here."""
    sched = state.iterative
    sched.pending.pop(run_id, None)
    for key in [k for k in sched.placed if k[0] == run_id]:
        sched.placed.pop(key, None)
        for holder in sched.holders.pop(key, set()):
            view = sched.workers.get(holder)
            if view is not None:
                view.drop(key)
    sched.barriers.pop(run_id, None)
    sched.refused.pop(run_id, None)


# A task of an iterative run is any job of it but the root, which is never given out (its
# ``RunState.pushed`` is set when it starts: core/start.py).
def result(state: PeerState, msg: m.JobResult, thief: str, now: float) -> Effects:
    """A result came back: one of this master's tasks, if it placed it."""
    key = (msg.run_id, msg.path)
    return finished(state, key, thief, now) if key in state.iterative.placed else []


kinds.register(
    kinds.KindRules(
        "iterative",
        owns=lambda job: job.run.pushed,
        lost=lost,
        taken_back=taken_back,
        forget_run=forget_run,
        task_ready=task_ready,
        result=result,
    )
)
