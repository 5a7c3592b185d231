"""The thief: the trio-side service that steals work for an idle compute thread.

The compute thread says when it wants work (``set_wanted``); while it does and some run is
active, the thief runs steal rounds planned by ``stealing.plan_round``: with CRS, one
asynchronous wide-area request at a time plus synchronous requests inside the cluster; with RS,
synchronous requests to anyone. A job that arrives is handed to the compute thread, even when a
late wide-area reply brings it after the worker found other work: a stolen job is never
dropped, since its victim waits for its result.
"""

from __future__ import annotations

import bisect
import logging
import random
from dataclasses import dataclass, field
from typing import Protocol

import trio

from satind.config import StealConfig
from satind.engine.jobs import Job
from satind.engine.stealing import Candidates, backoff_delay, plan_round
from satind.net import messages as m
from satind.net.requests import Requests

log = logging.getLogger(__name__)

# Upper bounds (seconds) of the steal round-trip histogram buckets; the last bucket is open.
# Buckets, unlike a median, add up across peers.
RTT_BUCKETS_S = (
    0.0001,
    0.0002,
    0.0003,
    0.0005,
    0.00075,
    0.001,
    0.0015,
    0.002,
    0.003,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
)


def rtt_bucket_names() -> list[str]:
    names = [f"steal_rtt_le_{bound * 1000:g}ms" for bound in RTT_BUCKETS_S]
    return [*names, f"steal_rtt_gt_{RTT_BUCKETS_S[-1] * 1000:g}ms"]


def rtt_median_s(hist: list[float]) -> float | None:
    """Median round trip from histogram counts, interpolated inside its bucket."""
    total = sum(hist)
    if total == 0:
        return None
    half = total / 2
    seen = 0.0
    low = 0.0
    for bound, count in zip(RTT_BUCKETS_S, hist, strict=False):
        if count and seen + count >= half:
            return low + (bound - low) * (half - seen) / count
        seen += count
        low = bound
    return RTT_BUCKETS_S[-1]


@dataclass
class StealCounters:
    """Counters of this peer's stealing (names are those of the run JSON ``stats``)."""

    steal_attempts_local: int = 0
    steal_attempts_wide: int = 0
    stolen_local: int = 0
    stolen_wide: int = 0
    # Victim side: jobs other peers took from this peer's queue.
    jobs_given: int = 0
    # Jobs stolen from this peer by a member that died or left, put back in our queue.
    jobs_restarted: int = 0
    rtt_hist: list[int] = field(default_factory=lambda: [0] * (len(RTT_BUCKETS_S) + 1))

    def record_rtt(self, seconds: float) -> None:
        self.rtt_hist[bisect.bisect_left(RTT_BUCKETS_S, seconds)] += 1

    def as_dict(self) -> dict[str, float]:
        out: dict[str, float] = {
            "steal_attempts_local": self.steal_attempts_local,
            "steal_attempts_wide": self.steal_attempts_wide,
            "stolen_local": self.stolen_local,
            "stolen_wide": self.stolen_wide,
            "jobs_given": self.jobs_given,
            "jobs_restarted": self.jobs_restarted,
        }
        out.update(zip(rtt_bucket_names(), self.rtt_hist, strict=True))
        return out


class ThiefHost(Protocol):
    """What the thief needs from its peer."""

    requests: Requests

    def victims(self) -> Candidates: ...

    def has_active_runs(self) -> bool: ...

    def post(self, dest: str, msg: m.Message) -> bool: ...

    def accept_stolen(self, spec: m.JobSpec, victim: str) -> Job | None:
        """Turn a stolen job into a local Job record, or None when it cannot run here."""
        ...

    def deliver(self, job: Job) -> None:
        """Hand a job to the compute thread."""
        ...

    @property
    def needs_orphans(self) -> bool:
        """This peer has no orphan table yet: ask for one with the steal (satin-ft §3.5)."""
        ...

    def got_orphan_table(self, tuples: list[m.OrphanTuple]) -> None: ...


class Thief:
    def __init__(self, cfg: StealConfig, rng: random.Random, host: ThiefHost) -> None:
        self.cfg = cfg
        self.rng = rng
        self.host = host
        self.counters = StealCounters()
        self._worker_wants = False
        # The run the worker's waiting sync belongs to ("": it waits for any work).
        self._run = ""
        self._go = trio.Event()
        self._wide_in_flight = False
        self._nursery: trio.Nursery | None = None

    # -- called by the peer on the trio thread --------------------------------------------

    def set_wanted(self, wanted: bool, run_id: str = "") -> None:
        self._worker_wants = wanted
        self._run = run_id if wanted else ""
        self.update()

    def update(self) -> None:
        """Re-evaluate whether to steal (the worker's wish and whether any run is active)."""
        active = self._worker_wants and self.host.has_active_runs()
        if active and not self._go.is_set():
            self._go.set()
        elif not active and self._go.is_set():
            self._go = trio.Event()

    def on_late_reply(self, msg: m.StealReply, victim: str, wide: bool) -> None:
        """A steal reply nobody waits for any more (it timed out): keep its job anyway."""
        if msg.job is not None:
            self._take(msg.job, victim, wide)

    # -- the service ----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        failures = 0
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            while True:
                await self._go.wait()
                plan = plan_round(
                    self.cfg.algorithm, self.rng, self.host.victims(), self._wide_in_flight
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
        counters = self.counters
        if wide:
            counters.steal_attempts_wide += 1
        else:
            counters.steal_attempts_local += 1
        requests = self.host.requests
        req = requests.new()
        started = trio.current_time()
        self.host.post(victim, m.StealRequest(req, wide, self.host.needs_orphans, self._run))
        reply = await requests.reply_within(req, within_s)
        if not isinstance(reply, m.StealReply):
            return False  # no answer in time, or the victim failed to answer (ErrorReply)
        counters.record_rtt(trio.current_time() - started)
        if reply.orphans is not None:
            self.host.got_orphan_table(reply.orphans)
        if reply.job is None:
            return False
        return self._take(reply.job, victim, wide)

    def _take(self, spec: m.JobSpec, victim: str, wide: bool) -> bool:
        job = self.host.accept_stolen(spec, victim)
        if job is None:
            return False
        if wide:
            self.counters.stolen_wide += 1
        else:
            self.counters.stolen_local += 1
        # The worker has work now; it says so again when it runs dry.
        self._worker_wants = False
        self.update()
        self.host.deliver(job)
        return True
