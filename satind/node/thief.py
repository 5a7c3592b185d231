"""The steal loop: the trio-side service that steals work for an idle compute side.

The compute side says when it wants work (``set_wanted``); while it does and some run is
active, the loop runs steal rounds planned by ``core/stealing.plan_round``: with CRS, one
asynchronous wide-area request at a time plus synchronous requests inside the cluster; with
RS, synchronous requests to anyone. What a reply brings is the core's (``core/thief.py``). A
job that arrives is handed to the compute side, even when a late wide-area reply brings it
after the worker found other work: a stolen job is never dropped, since its victim waits for
its result. With no run active the loop sleeps: an idle system sends no steal requests.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Protocol

import trio

from satind.config import StealConfig
from satind.core.spmd import offer
from satind.core.state import PeerState
from satind.core.stealing import backoff_delay, plan_round
from satind.net import messages as m
from satind.net.requests import Requests
from satind.trace import Traces

log = logging.getLogger(__name__)


class ThiefHost(Protocol):
    """What the steal loop needs from its node."""

    state: PeerState
    requests: Requests
    traces: Traces

    def post(self, dest: str, msg: m.Message) -> bool: ...

    def take_stolen(self, spec: m.JobSpec, victim: str) -> bool:
        """Accept a stolen job and hand it to the compute side; False if it cannot run."""
        ...

    def got_orphan_table(self, tuples: list[m.OrphanTuple]) -> None: ...


class Thief:
    def __init__(self, cfg: StealConfig, rng: random.Random, host: ThiefHost) -> None:
        self.cfg = cfg
        self.rng = rng
        self.host = host
        self._worker_wants = False
        # The run the worker's waiting sync belongs to ("": it waits for any work).
        self._run = ""
        self._go = trio.Event()
        self._wide_in_flight = False

    # -- called by the node on the trio thread --------------------------------------------

    def set_wanted(self, wanted: bool, run_id: str = "") -> None:
        self._worker_wants = wanted
        self._run = run_id if wanted else ""
        self.update()

    def update(self) -> None:
        """Re-evaluate whether to steal: the worker wants work and some run is active."""
        active = self._worker_wants and self.host.state.has_active_runs()
        # Idle, for self-adaptivity: the compute side wants work that some run could give.
        self.host.state.utilization.set_idle(active, trio.current_time())
        if active and not self._go.is_set():
            self._go.set()
        elif not active and self._go.is_set():
            self._go = trio.Event()

    def on_late_reply(self, msg: m.StealReply, victim: str, wide: bool) -> None:
        """A steal reply nobody waits for any more (it timed out): keep its jobs anyway."""
        if msg.job is not None:
            self._take_all(msg, victim, wide)

    # -- the service ----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        failures = 0
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                await self._go.wait()
                if not self.host.state.has_active_runs():
                    # A run ended since the last round (and nothing said so): go quiet.
                    self.update()
                    continue
                plan = plan_round(
                    self.cfg.algorithm, self.rng, self.host.state.victims(), self._wide_in_flight
                )
                if plan.wide is not None:
                    self._wide_in_flight = True
                    nursery.start_soon(self._wide_steal, plan.wide)
                found = False
                if plan.sync is not None:
                    found = await self._steal_from(
                        plan.sync, plan.sync_is_wide, self.cfg.request_timeout_s
                    )
                if found:
                    failures = 0
                    continue
                failures += 1
                delay = backoff_delay(self.cfg, failures)
                if plan.sync is None:
                    # Nobody to ask synchronously (alone in the cluster): do not spin while a
                    # wide-area request is out.
                    delay = max(delay, self.cfg.backoff_min_s)
                if delay:
                    await trio.sleep(delay)

    async def _wide_steal(self, victim: str) -> None:
        try:
            await self._steal_from(victim, True, self.cfg.wide_request_timeout_s)
        finally:
            self._wide_in_flight = False

    async def _steal_from(self, victim: str, wide: bool, within_s: float) -> bool:
        counters = self.host.state.steal
        if wide:
            counters.steal_attempts_wide += 1
        else:
            counters.steal_attempts_local += 1
        requests = self.host.requests
        req = requests.new()
        started, wall = trio.current_time(), time.time()
        for_run = self._run
        self.host.post(
            victim,
            m.StealRequest(
                req,
                wide,
                self.host.state.needs_orphans,
                for_run,
                offer(self.host.state),
                self.host.state.cannot_run(),
                # Idle (no sync of ours waits): take half of a bag at once.
                1 if for_run else self.cfg.batch_max,
            ),
        )
        reply = await requests.reply_within(req, within_s)
        if wide:
            # Waiting on the wide area, answered or not (adaptivity: a cluster's overhead).
            self.host.state.utilization.wide_wait_s += trio.current_time() - started
        job = reply.job if isinstance(reply, m.StealReply) else None
        # For the run's trace: what the thief stole for (a waiting sync's run, else any).
        runs = [for_run] if for_run else list(self.host.state.runs.active)
        self.host.traces.steal(runs, victim, wide, wall, job.run_id if job else None)
        if not isinstance(reply, m.StealReply):
            return False  # no answer in time, or the victim failed to answer (ErrorReply)
        counters.record_rtt(trio.current_time() - started)
        if reply.orphans is not None:
            self.host.got_orphan_table(reply.orphans)
        if reply.job is None:
            return False
        return self._take_all(reply, victim, wide)

    def _take_all(self, reply: m.StealReply, victim: str, wide: bool) -> bool:
        """Take the reply's job and its siblings (``StealReply.more``), oldest first: the
        compute side runs the newest first, and thieves of ours take the oldest."""
        assert reply.job is not None
        took = self._take(reply.job, victim, wide)
        for spec in reply.more:
            if self.host.state.draining:
                # A reply that was on its way when the drain began (core/drain.py gave back
                # the rest): the victim takes these back rather than the drain waiting.
                self.host.post(victim, m.JobState(spec.run_id, spec.path, "unknown"))
                continue
            took = self._take(spec, victim, wide) or took
        return took

    def _take(self, spec: m.JobSpec, victim: str, wide: bool) -> bool:
        if not self.host.take_stolen(spec, victim):
            return False
        self.host.state.count_steal(spec.run_id, "stolen_wide" if wide else "stolen_local")
        # The worker has work now; it says so again when it runs dry.
        self._worker_wants = False
        self.update()
        return True
