"""Reclaiming this machine's peers while its owner uses it (``[owner] reclaim``), as desktop
grids do: scheduling-iterative-apps-volatile-resources' RECLAIMED state, detected instead of
declared by hand (`satind reclaim`).

The daemon is the machine's process, so it watches: every ``sample_s`` it reads how busy the
CPUs it may use were (``/proc/stat``) and how much of that was its own (itself and its peer
processes, from ``/proc/PID/stat``). The rest is the owner's load, as a fraction of those
CPUs. Above ``reclaim_above`` for ``reclaim_after_s`` in a row, it signals its peers SIGUSR1
(reclaim: suspend the work here, take none; every member hears it at once through the
membership); under ``release_below`` for ``release_after_s`` in a row, SIGUSR2 (release: go
on where they were). A peer reclaimed by hand is left to its operator: SIGUSR2 releases only
what SIGUSR1 reclaimed (node/peer.py ``owner_load``).

Counted as the daemon's own: the daemon and its peers, not processes a plugin starts (they
count as the owner's). Without ``/proc`` (not Linux) nothing is measured and nothing reclaimed;
the daemon says so once.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import trio

from satind.config import OwnerConfig
from satind.node.profiler import cpu_times, machine_cpus

log = logging.getLogger(__name__)


@dataclass
class OwnerWatch:
    """The decision, as plain code over the load samples: hysteresis with two thresholds and
    two durations (the reclaim quick, the release slow)."""

    cfg: OwnerConfig
    reclaimed: bool = False
    # When the load last crossed to the side that would change the state (None: it is not
    # on that side now).
    since: float | None = None

    def update(self, now: float, load: float) -> bool | None:
        """The owner's load ``load`` (a fraction of the CPUs) at ``now``: True to reclaim,
        False to release, None to leave the peers as they are."""
        crossing = (
            load < self.cfg.release_below if self.reclaimed else load > self.cfg.reclaim_above
        )
        if not crossing:
            self.since = None
            return None
        if self.since is None:
            self.since = now
        wait = self.cfg.release_after_s if self.reclaimed else self.cfg.reclaim_after_s
        if now - self.since < wait:
            return None
        self.reclaimed = not self.reclaimed
        self.since = None
        return self.reclaimed


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has had; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            text = f.read()
    except OSError:
        return 0.0
    # The command name (field 2) may hold spaces and parentheses: count from the last ")".
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def watch(
    cfg: OwnerConfig, pids: Callable[[], Iterable[int]], signal_peers: Callable[[bool], None]
) -> None:
    """Sample the owner's load until cancelled, and reclaim or release the peers (``pids``:
    the peer processes now; ``signal_peers(True)``: reclaim them)."""
    decide = OwnerWatch(cfg)
    cpus = machine_cpus()
    last = cpu_times(cpus)
    if last is None:
        log.warning("[owner] reclaim: no /proc/stat here, the owner's load is not measured")
        return
    own_last = own_cpu_s(pids())
    while True:
        await trio.sleep(cfg.sample_s)
        now_times, own = cpu_times(cpus), own_cpu_s(pids())
        if now_times is None or now_times[1] <= last[1]:
            continue
        jiffies = os.sysconf("SC_CLK_TCK")
        # Busy CPUs over the interval, in CPU seconds, less the daemon's own: process by
        # process, so that a peer that exits takes its CPU time out of neither sample (a new
        # one counts whole: it started within the interval).
        busy_s = (now_times[0] - last[0]) / jiffies
        span_s = (now_times[1] - last[1]) / jiffies  # CPU seconds that passed, all CPUs
        mine = sum(max(0.0, cpu - own_last.get(pid, 0.0)) for pid, cpu in own.items())
        load = max(0.0, busy_s - mine) / span_s
        last, own_last = now_times, own
        verdict = decide.update(trio.current_time(), load)
        if verdict is not None:
            log.info(
                "owner: other processes keep %.0f%% of the CPUs busy: %s this machine's peers",
                100 * load,
                "reclaiming" if verdict else "releasing",
            )
            signal_peers(verdict)


def own_cpu_s(pids: Iterable[int]) -> dict[int, float]:
    """CPU seconds the daemon and each of its peer processes have had, by process id."""
    return {pid: process_cpu_s(pid) for pid in (os.getpid(), *pids)}
