"""Runs as one peer sees them: the run table, and the master's side of a run's life.

A client submits to any peer, which becomes the run's master: it parses the arguments, gives
the run an id, announces it to every member (RunStart) and puts the root job in its own queue.
When the root finishes, the master gathers every member's counters for the run, sends the
submitter a RunResult and tells the members the run is over (RunDone).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from satind.engine.errors import error_info
from satind.engine.jobs import Job, RunState
from satind.net import codec
from satind.net import messages as m
from satind.plugin import Plugin

log = logging.getLogger(__name__)


def new_run_id() -> str:
    """A run id: sortable by start time, unique without coordination."""
    return time.strftime("%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(3)


@dataclass
class PeerRun:
    """One run on one peer."""

    info: m.RunInfo
    state: RunState
    plugin: Plugin | None
    # Why this peer cannot run the run's jobs (unknown plugin, other code version), or None.
    refused: str | None = None
    # This peer's counters when the run started here: per-run traffic is the difference.
    baseline: dict[str, float] = field(default_factory=dict)
    # Master only: who submitted, when (trio clock), and the root job.
    submitter: str | None = None
    started: float = 0.0
    root: Job | None = None


def sum_counters(parts: Sequence[dict[str, float]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for part in parts:
        for key, value in part.items():
            total[key] = total.get(key, 0) + value
    return total


def counters_delta(now: dict[str, float], baseline: dict[str, float]) -> dict[str, float]:
    return {key: value - baseline.get(key, 0) for key, value in now.items()}


def result_message(
    run: PeerRun, root: Job, elapsed_s: float, peers: int, stats: dict[str, float]
) -> m.RunResult:
    """The RunResult for a finished root: its encoded value, or the error it raised."""
    exc = root.error
    if exc is None:
        try:
            value: bytes | None = codec.encode_value(root.value)
        except codec.EncodeError as err:
            return m.RunResult(
                run.info.run_id, None, error_info(err), elapsed_s, peers, _ints(stats)
            )
        return m.RunResult(run.info.run_id, value, None, elapsed_s, peers, _ints(stats))
    return m.RunResult(run.info.run_id, None, error_info(exc), elapsed_s, peers, _ints(stats))


def _ints(stats: dict[str, float]) -> dict[str, float]:
    """Counters are sums of integers; send them as such (floats only where fractional)."""
    out: dict[str, Any] = {}
    for key, value in stats.items():
        out[key] = int(value) if float(value).is_integer() else value
    return out
