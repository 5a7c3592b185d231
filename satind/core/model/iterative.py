"""An iterative run's scheduling records (the rules: core/iterative.py): what a master knows of
each volatile worker, the tasks it placed and who holds them, and every run's last barrier."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from satind.core.model import JobKey
from satind.volatile.model import UP, Estimator
from satind.work.jobs import Job
from satind.work.rng import Rng, seeded

# The weight of the newest transfer in a worker's moving average: the last few count.
TRANSFER_WEIGHT = 0.25


@dataclass
class WorkerView:
    """What the master knows of one worker."""

    estimator: Estimator = field(default_factory=Estimator)
    state: int = UP
    # Mean seconds a task took there (None until one finished), over ``tasks_done``.
    task_s: float | None = None
    tasks_done: int = 0
    # Tasks it holds (key -> when pushed, then when it arrived), and those still in transfer.
    holding: dict[JobKey, float] = field(default_factory=dict)
    in_transfer: set[JobKey] = field(default_factory=set)
    # Seconds a push took to arrive there (to its TaskAck): what the link gives a task's
    # input, measured; a moving average (None until one arrived), as links change.
    transfer_s: float | None = None
    # The shipped code versions (code hashes) it has, as its tasks said (TaskAck.has_code);
    # and its tasks that came before the code, whose time includes fetching it.
    programs: set[str] = field(default_factory=set)
    fetching: set[JobKey] = field(default_factory=set)

    def drop(self, key: JobKey) -> float | None:
        """Forget a task it held (finished, lost, given back, or its run over); returns
        when it was pushed (or arrived), None if it did not hold it."""
        self.in_transfer.discard(key)
        self.fetching.discard(key)
        return self.holding.pop(key, None)

    def arrived(self, key: JobKey, now: float, code: str = "", has_code: bool = True) -> bool:
        """A task's push arrived: its transfer time is measured, and from now on the task
        computes (its task time counts from here, not from the push). ``code``: its run's
        shipped version. If the worker lacks it (not ``has_code``), the transfer goes on
        until a second ack says the code came (the program's transfer, T_prog): the task
        computes from then. Returns True when that second ack ends a program transfer."""
        pushed = self.holding.get(key)
        if pushed is None:
            self.in_transfer.discard(key)
            return False  # a late ack of a copy finished elsewhere
        if key in self.fetching:
            if not has_code:
                return False  # (a duplicate)
            self.fetching.discard(key)
            self.programs.add(code)
            self.holding[key] = now
            self.in_transfer.discard(key)
            return True
        if key in self.in_transfer:
            took = now - pushed
            last = self.transfer_s
            self.transfer_s = took if last is None else last + TRANSFER_WEIGHT * (took - last)
            self.holding[key] = now
        if code and not has_code:
            self.programs.discard(code)  # evicted from its cache since, if it had it
            self.fetching.add(key)  # the channel stays busy with the program
            return False
        if code:
            self.programs.add(code)
        self.in_transfer.discard(key)
        return False


@dataclass
class IterativeCounters:
    """Names are those of the run JSON ``stats`` (stats.py)."""

    tasks_pushed: int = 0
    task_replicas: int = 0
    tasks_requeued: int = 0
    program_transfers: int = 0
    barriers: int = 0

    def as_dict(self) -> dict[str, float]:
        return dict(vars(self))


@dataclass
class Scheduling:
    """A peer's iterative-run bookkeeping: as a master (its runs' tasks) and as a member
    (every run's last barrier)."""

    counters: IterativeCounters = field(default_factory=IterativeCounters)
    pending: dict[str, deque[Job]] = field(default_factory=dict)
    # Every placed task not finished, and who holds a copy of it.
    placed: dict[JobKey, Job] = field(default_factory=dict)
    holders: dict[JobKey, set[str]] = field(default_factory=dict)
    workers: dict[str, WorkerView] = field(default_factory=dict)
    ticking: bool = False
    rng: Rng = field(default_factory=lambda: seeded(1))
    # run -> the workers that take no part in it (they gave a pushed task back: a plugin or
    # shipped code they lack): never pushed to again for that run.
    refused: dict[str, set[str]] = field(default_factory=dict)
    # run -> (epoch, iteration, state): read by the compute side when a root starts.
    barriers: dict[str, tuple[int, int, bytes]] = field(default_factory=dict)

    def keep_barrier(self, run_id: str, epoch: int, iteration: int, data: bytes) -> bool:
        """Keep a run's barrier if it is the newest known (by epoch, then iteration)."""
        have = self.barriers.get(run_id)
        if have is not None and (epoch, iteration) <= (have[0], have[1]):
            return False
        self.barriers[run_id] = (epoch, iteration, data)
        return True


# -- tasks in ----------------------------------------------------------------------------------
