"""Core runtime benchmarks (issue: core runtime): spawn+sync cost, sequential efficiency,
parallel efficiency on this machine, steal round trip, peer memory.

    python benchmarks/core.py [--repeat 5] [--quick]

Prints a markdown report; every number is the median of --repeat runs, and every ratio is
taken between runs of the same invocation, interleaved so machine noise hits both sides.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from satind_plugins import fib as fib_plugin
from satind_plugins import knapsack, nqueens

from satind.api import spawnable, sync
from satind.config import EngineConfig
from satind.core.stealing import rtt_bucket_names, rtt_median_s
from satind.engine import worker as worker_mod
from satind.engine.datastack import on_a_large_chunk
from satind.engine.frames import make_root
from satind.engine.worker import Worker, tune_process
from satind.plugin import find
from satind.work.jobs import Job, RunState

ROOT = Path(__file__).resolve().parent.parent


# -- spawn + sync cost -----------------------------------------------------------------------


@spawnable
def fib_all(n: int) -> int:
    """fib spawning every call (no threshold): the spawn/sync micro-benchmark."""
    if n < 2:
        return n
    a = fib_all.spawn(n - 1)
    b = fib_all.spawn(n - 2)
    sync()
    return a.result() + b.result()


def fib_plain(n: int) -> int:
    if n < 2:
        return n
    return fib_plain(n - 1) + fib_plain(n - 2)


def calls(n: int) -> int:
    a, b = 1, 1  # calls(0) = calls(1) = 1; calls(n) = 1 + calls(n-1) + calls(n-2)
    for _ in range(n - 1):
        a, b = b, 1 + a + b
    return b if n >= 1 else 1


class _NoHooks:
    def report(self, event: object) -> None:
        pass


def size_of_job() -> int:
    """Bytes of one Job record (without its arguments): built the ordinary way, since a
    compiled Job (setup.py) cannot be made with ``Job.__new__`` alone."""
    return sys.getsizeof(Job(fib_plain, (), None, 0, RunState("r", "fib", 0.5), 1.0))


def spawn_cost(n: int, repeat: int) -> dict[str, float]:
    """(time of fib(n) spawning every call - time of plain fib(n)) / spawns, in-process."""
    tune_process(EngineConfig())  # as a peer process does (GC threshold, switch interval)
    w = Worker(EngineConfig(), _NoHooks())
    worker_mod.CURRENT = w
    per_spawn = []
    plain_ns = []
    try:
        for _ in range(repeat):
            t = time.perf_counter()
            fib_plain(n)
            plain = time.perf_counter() - t
            run = RunState("bench", "fib", 0.5)
            root = make_root(fib_all.fn, (n,), run)
            t = time.perf_counter()
            w.run_job(root)
            spawned = time.perf_counter() - t
            spawns = run.spawns
            assert spawns == calls(n) - 1
            per_spawn.append((spawned - plain) / spawns * 1e9)
            plain_ns.append(plain / calls(n) * 1e9)
    finally:
        worker_mod.CURRENT = None
    return {
        "n": n,
        "spawns": calls(n) - 1,
        "spawn_sync_ns": statistics.median(per_spawn),
        "plain_call_ns": statistics.median(plain_ns),
    }


# -- whole runs ------------------------------------------------------------------------------


def satind_run(*args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "satind", "run", *args, "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def timed(fn: Callable[[], object]) -> float:
    """fn's wall time, run as a peer runs a job: on one large data stack chunk
    (satind/engine/datastack.py), so that the baseline does not pay for an unlucky start
    against the end of CPython's 16 KB chunks while satind does not."""
    t = time.perf_counter()
    on_a_large_chunk(fn, EngineConfig().data_stack_bytes // 8)
    return time.perf_counter() - t


def nqueens_seq(n: int) -> Callable[[], object]:
    return lambda: nqueens.count_seq(n, 0, 0, 0)


def knapsack_best_seq(items: int, seed: int) -> Callable[[], object]:
    """The best sequential program: the dive's bound, then one branch-and-bound search that
    improves its bound as it goes (what the spawned version cannot do without shared objects).
    """

    def run() -> object:
        args = knapsack.parse([str(items), str(seed)])
        return knapsack.search_seq(args[0], 0, args[2], 0, args[4])

    return run


def plugin_without_satind(argv: list[str]) -> Callable[[], object]:
    """The plugin's own program called without satind (spawn = plain call). Parsing is left
    out, as satind's elapsed_s leaves it out."""
    plugin = find(argv[0])
    args = plugin.parse_args(argv[1:])
    return lambda: plugin.entry(*args)


def fib_seq(n: int) -> Callable[[], object]:
    return lambda: fib_plugin.fib_seq(n)


def efficiency(
    name: str, argv: list[str], seq: Callable[[], object], peers: int, repeat: int
) -> dict[str, Any]:
    """sequential / (peers x satind time), medians; runs interleaved."""
    seq_times, par_times = [], []
    rtt = [0.0] * len(rtt_bucket_names())
    for _ in range(repeat):
        seq_times.append(timed(seq))
        out = satind_run(*argv, "--peers", str(peers), "--no-check")
        par_times.append(out["elapsed_s"])
        for i, key in enumerate(rtt_bucket_names()):
            rtt[i] += out["stats"].get(key, 0)
    seq_s = statistics.median(seq_times)
    par_s = statistics.median(par_times)
    median_rtt = rtt_median_s(rtt)
    return {
        "workload": name,
        "peers": peers,
        "sequential_s": seq_s,
        "satind_s": par_s,
        "efficiency": seq_s / (peers * par_s),
        "steal_rtt_median_ms": None if median_rtt is None else median_rtt * 1000,
        "steal_replies": sum(rtt),
    }


def idle_peer_rss_mb() -> float:
    """Peak RSS of an idle peer process (VmHWM), started as `satind run` starts them."""
    import trio

    from satind.config import DEFAULT
    from satind.ops.launcher import ephemeral_keys, local_peers

    result: list[float] = []

    async def main() -> None:
        async with local_peers(1, cfg=DEFAULT, keys=ephemeral_keys()) as peers:
            await trio.sleep(1.0)
            status = await trio.Path(f"/proc/{peers[0].process.pid}/status").read_text()
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    result.append(int(line.split()[1]) / 1024)

    trio.run(main)
    return result[0]


def orphan_entry_bytes(entries: int = 100_000) -> float:
    """Bytes per orphan-table entry as a peer holds them: tuples decoded off the wire (their
    own path bytes and holder strings) filed in a run's table (core/orphans.py)."""
    import tracemalloc

    from satind.core.orphans import Orphans
    from satind.net import codec
    from satind.net import messages as m

    def tuple_(i: int) -> m.OrphanTuple:
        path = bytes([1, 2, i % 100, i // 100 % 100, i // 10000])
        return m.OrphanTuple("r1", path, f"node-{i % 16}/0")

    wire = [
        codec.encode_message(m.Gossip(m.Broadcasts([], [], [tuple_(i)]))) for i in range(entries)
    ]
    state = RunState("r1", "tree", 0.25)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for frame in wire:
        msg = codec.decode_message(frame)
        assert isinstance(msg, m.Gossip)
        for item in msg.gossip.tuples:
            Orphans.file(state, item)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert state.orphans is not None and len(state.orphans) == entries
    return (after - before) / entries


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    args = parser.parse_args()
    r = args.repeat
    print(f"machine: {machine()}")
    print(f"command: python benchmarks/core.py --repeat {r}{' --quick' if args.quick else ''}\n")

    cost = spawn_cost(20 if args.quick else 25, r)
    print("## spawn + sync cost (one peer, in-process engine)\n")
    print(
        f"fib({cost['n']}) spawning every call: {cost['spawns']:,} spawns; plain call "
        f"{cost['plain_call_ns']:.0f} ns; **spawn+sync {cost['spawn_sync_ns']:.0f} ns** "
        f"(goal <= 500 ns; Satin/Java 314 ns). Job record: {size_of_job()} bytes.\n"
    )

    q = args.quick
    seq_rows = [
        (
            "nqueens 12" if q else "nqueens 14",
            "plain bit-mask search",
            ["nqueens", "12" if q else "14"],
            nqueens_seq(12 if q else 14),
        ),
        (
            "knapsack 60 5" if q else "knapsack 80 1",
            "the plugin without satind",
            ["knapsack", "60", "5"] if q else ["knapsack", "80", "1"],
            plugin_without_satind(["knapsack", "60", "5"] if q else ["knapsack", "80", "1"]),
        ),
        (
            "knapsack 60 5" if q else "knapsack 80 1",
            "best sequential B&B",
            ["knapsack", "60", "5"] if q else ["knapsack", "80", "1"],
            knapsack_best_seq(60, 5) if q else knapsack_best_seq(80, 1),
        ),
    ]
    par_rows = [
        (
            "nqueens 12" if q else "nqueens 14",
            "plain bit-mask search",
            ["nqueens", "12" if q else "14"],
            nqueens_seq(12 if q else 14),
        ),
        (
            "fib 30" if q else "fib 39",
            "plain recursion",
            ["fib", "30" if q else "39"],
            fib_seq(30 if q else 39),
        ),
        (
            "tree 3 8 2 busy" if q else "tree 3 8 12 busy",
            "the plugin without satind",
            ["tree", "3", "8", "2" if q else "12", "busy"],
            plugin_without_satind(["tree", "3", "8", "2" if q else "12", "busy"]),
        ),
    ]
    rows = [(base, efficiency(name, argv, seq, 1, r)) for name, base, argv, seq in seq_rows]
    rows += [(base, efficiency(name, argv, seq, 2, r)) for name, base, argv, seq in par_rows]
    print("## sequential (1 peer) and parallel (2 peers) efficiency\n")
    print(
        "| workload | sequential baseline | peers | sequential s | satind s | efficiency "
        "| steal RTT median ms (replies) |"
    )
    print("|---|---|---|---|---|---|---|")
    for base, row in rows:
        rtt = "-"
        if row["steal_rtt_median_ms"] is not None:
            rtt = f"{row['steal_rtt_median_ms']:.2f} ({int(row['steal_replies'])})"
        print(
            f"| {row['workload']} | {base} | {row['peers']} | {row['sequential_s']:.3f} | "
            f"{row['satind_s']:.3f} | {row['efficiency']:.3f} | {rtt} |"
        )
    print(f"\nidle peer peak RSS: {idle_peer_rss_mb():.1f} MB (goal < 60 MB)")
    print(f"orphan-table entry: {orphan_entry_bytes():.0f} bytes")


if __name__ == "__main__":
    main()
