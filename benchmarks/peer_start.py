"""What starting a peer costs, forked from the template (ops/forker.py) against a new
interpreter (``[launcher] fork_peers = false``), interleaved in one invocation.

    python benchmarks/peer_start.py [--repeat 5] [--peers 4]

Prints a markdown report: for ``satind run nqueens 11 --peers P``, the median wall time and
CPU time (the command and every process it started: rusage of the waited children); and for
one idle peer, its peak RSS (VmHWM), its RSS and its proportional share (Pss: pages shared
with the template count in part).
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from satind.config import DEFAULT
from satind.ops.launcher import ephemeral_keys, local_peers


def one_run(peers: int, config: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one `satind run`, its peers and template included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [
            *(sys.executable, "-m", "satind", "run", "nqueens", "11"),
            *("--peers", str(peers), "--config", str(config)),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def idle_memory(fork: bool) -> dict[str, float]:
    """MB of one idle peer a second after it joined: VmHWM, VmRSS, Pss."""
    cfg = dataclasses.replace(
        DEFAULT, launcher=dataclasses.replace(DEFAULT.launcher, fork_peers=fork)
    )
    out: dict[str, float] = {}

    async def main() -> None:
        async with local_peers(1, cfg=cfg, keys=ephemeral_keys()) as peers:
            await trio.sleep(1.0)
            pid = peers[0].process.pid
            for name in ("status", "smaps_rollup"):
                for line in (await trio.Path(f"/proc/{pid}/{name}").read_text()).splitlines():
                    if line.startswith(("VmHWM:", "VmRSS:", "Pss:")):
                        out[line.split(":")[0]] = int(line.split()[1]) / 1024

    trio.run(main)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--peers", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        configs = {}
        for fork in (True, False):
            configs[fork] = Path(tmp) / f"fork-{fork}.toml"
            configs[fork].write_text(f"[launcher]\nfork_peers = {str(fork).lower()}\n")
        runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        memory: dict[bool, list[dict[str, float]]] = {True: [], False: []}
        for _ in range(args.repeat):
            for fork in (True, False):
                runs[fork].append(one_run(args.peers, configs[fork]))
                memory[fork].append(idle_memory(fork))
    print(f"machine: {platform.machine()}, {platform.python_version()}, repeat {args.repeat}")
    print()
    print(
        f"| `satind run nqueens 11 --peers {args.peers}` | wall s | CPU s | idle peer VmHWM MB "
        "| VmRSS MB | Pss MB |"
    )
    print("|---|---|---|---|---|---|")
    for fork in (True, False):
        wall = statistics.median(r[0] for r in runs[fork])
        cpu = statistics.median(r[1] for r in runs[fork])
        mem = {k: statistics.median(m[k] for m in memory[fork]) for k in ("VmHWM", "VmRSS", "Pss")}
        label = "forked from the template" if fork else "new interpreters"
        print(
            f"| {label} | {wall:.2f} | {cpu:.2f} | {mem['VmHWM']:.1f} | {mem['VmRSS']:.1f} "
            f"| {mem['Pss']:.1f} |"
        )


if __name__ == "__main__":
    main()
