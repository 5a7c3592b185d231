"""Test plugins written the way a careless author would: spawns that recurse forever, a job
that spawns without bound, a result too large for one message, a leaf that blocks, and
argument parsing and branching code that raise. Each must fail its own run only."""

from __future__ import annotations

import time
from collections.abc import Sequence

from satind import Plugin, spawnable, sync


@spawnable
def runaway(n: int) -> int:
    # No base case: every job spawns one more, forever.
    child = runaway.spawn(n + 1)
    sync()
    return child.result()


PLUGIN_RUNAWAY = Plugin(
    name="runaway",
    entry=runaway,
    usage="runaway",
    parse=lambda argv: (0,),
    max_branching=1,
)


@spawnable
def one(i: int) -> int:
    return i


@spawnable
def flood(count: int) -> int:
    # Spawns without syncing in between: the queue grows by `count` jobs.
    handles = [one.spawn(i) for i in range(count)]
    sync()
    return sum(h.result() for h in handles)


PLUGIN_FLOOD = Plugin(
    name="flood",
    entry=flood,
    usage="flood COUNT",
    parse=lambda argv: (int(argv[0]),),
    max_branching=2,
)


@spawnable
def blob(size: int, linger_s: float) -> bytes:
    time.sleep(linger_s)  # long enough for an idle peer to steal its sibling
    return b"x" * size


@spawnable
def big_results(size: int) -> int:
    # Eight children, so that some are stolen: their results must travel back, and cannot.
    handles = [blob.spawn(size, 0.3) for _ in range(8)]
    sync()
    return sum(len(h.result()) for h in handles)


PLUGIN_BIG = Plugin(
    name="bigresult",
    entry=big_results,
    usage="bigresult BYTES",
    parse=lambda argv: (int(argv[0]),),
    max_branching=8,
)


@spawnable
def block(seconds: float) -> int:
    time.sleep(seconds)  # a leaf stuck on I/O, a lock, a remote service...
    return 1


@spawnable
def blocking(seconds: float, quick: int) -> int:
    if quick == 0:
        time.sleep(seconds)  # the root itself blocks, on the master
        return 1
    handles = [block.spawn(seconds)] + [block.spawn(0.01) for _ in range(quick)]
    sync()
    return sum(h.result() for h in handles)


PLUGIN_BLOCKING = Plugin(
    name="blocking",
    entry=blocking,
    usage="blocking SECONDS QUICK",
    parse=lambda argv: (float(argv[0]), int(argv[1])),
    max_branching=16,
)


def _parse_raises(argv: Sequence[str]) -> tuple[int]:
    options = {"n": 1}
    return (options[argv[0]],)  # KeyError for anything but "n": a bug, not a usage error


PLUGIN_BADPARSE = Plugin(
    name="badparse",
    entry=one,
    usage="badparse n",
    parse=_parse_raises,
)


def _branching_raises(args: tuple[int, ...]) -> int:
    known: dict[int, int] = {}
    return known[args[0]]  # a KeyError: a bug in the plugin


PLUGIN_BADBRANCHING = Plugin(
    name="badbranching",
    entry=one,
    usage="badbranching N",
    parse=lambda argv: (int(argv[0]),),
    max_branching=_branching_raises,
)
