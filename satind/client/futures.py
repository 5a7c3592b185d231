"""Waiting on several runs at once, as a Dask or ``concurrent.futures`` user does:
``satind.as_completed(runs)``, ``satind.wait(runs, return_when=...)`` (and
``cluster.gather(runs)``, ``run.add_done_callback(fn)`` in client/sync.py).

A run's end is a ``concurrent.futures.Future`` of its outcome (``SyncRun.ended``), completed by
a task in its connection's loop; these are ``concurrent.futures``' own functions over those
futures, giving back the runs.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from satind.client.errors import Timeout
from satind.client.sync import SyncRun

FIRST_COMPLETED = concurrent.futures.FIRST_COMPLETED
FIRST_EXCEPTION = concurrent.futures.FIRST_EXCEPTION
ALL_COMPLETED = concurrent.futures.ALL_COMPLETED


class DoneAndNotDone(NamedTuple):
    """What ``wait`` returns: the runs that ended, and the others."""

    done: set[SyncRun]
    not_done: set[SyncRun]


def as_completed(runs: Iterable[SyncRun], timeout: float | None = None) -> Iterator[SyncRun]:
    """The runs, each as soon as it ends (ended already: first). ``run.result()`` then gives
    its value at once, or raises how it failed.

    Raises:
        Timeout: ``timeout`` seconds passed (from the call) before all ended; they go on.
    """
    by_future = {run.ended: run for run in runs}
    try:
        for ended in concurrent.futures.as_completed(by_future, timeout):
            yield by_future[ended]
    except TimeoutError:
        left = sum(1 for f in by_future if not f.done())
        raise Timeout(f"{left} runs did not end within {timeout:g} s; they go on") from None


def wait(
    runs: Iterable[SyncRun], timeout: float | None = None, return_when: str = ALL_COMPLETED
) -> DoneAndNotDone:
    """Wait until all ``runs`` end (``ALL_COMPLETED``), one ends (``FIRST_COMPLETED``) or one
    fails (``FIRST_EXCEPTION``), or ``timeout`` seconds pass; which ended and which not."""
    by_future = {run.ended: run for run in runs}
    done, not_done = concurrent.futures.wait(by_future, timeout, return_when)
    return DoneAndNotDone({by_future[f] for f in done}, {by_future[f] for f in not_done})
