"""Counting the nodes a sequential search visits, for the run's ``app_nodes`` statistic
(``satind.count``): the search adds one per node to a process-wide number (one increment, not
a call), and the job that ran it adds the difference to the run once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from satind import count

# Nodes the sequential searches of this process visited. The compute side runs one job at a
# time and a sequential search never syncs, so a job's difference is its own search's.
VISITED = [0]


def searched(search: Callable[..., Any], *args: Any) -> Any:
    """``search(*args)``, its visited nodes added to the run's ``app_nodes``."""
    before = VISITED[0]
    result = search(*args)
    count("nodes", VISITED[0] - before)
    return result
