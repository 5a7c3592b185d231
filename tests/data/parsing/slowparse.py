"""slowparse SECONDS: a plugin whose parse sleeps SECONDS — a stand-in for a parse stuck on
I/O or in a loop — for the tests of the parse bounds (run.parse_timeout_s,
run.parses_per_client)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from satind import Plugin, spawnable


@spawnable
def one(x: int) -> int:
    return x


def parse(argv: Sequence[str]) -> tuple[int]:
    time.sleep(float(argv[0]))
    return (1,)


PLUGIN = Plugin(name="slowparse", entry=one, usage="slowparse SECONDS", parse=parse)
