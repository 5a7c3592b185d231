"""A plugin that prints and logs inside its jobs (per-run logs)."""

from __future__ import annotations

import logging
import time

from satind import Plugin, spawnable, sync

log = logging.getLogger("chatty")


@spawnable
def chatty(n: int) -> int:
    if n < 2:
        time.sleep(0.01)
        print(f"leaf {n} says hello")
        log.warning("leaf %d logs", n)
        return 1
    a = chatty.spawn(n - 1)
    b = chatty.spawn(n - 2)
    sync()
    return int(a.result()) + int(b.result())


PLUGIN_CHATTY = Plugin(
    name="chatty",
    entry=chatty,
    usage="chatty N",
    parse=lambda argv: (int(argv[0]),),
    max_branching=2,
)
