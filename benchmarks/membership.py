"""Membership benchmarks (issue: networked daemon): time to agree on a SIGKILLed peer vs probe
interval, idle membership CPU per peer, time for a joiner to be known by all, and the steal
round trip over TLS vs plain TCP.

    python benchmarks/membership.py [--peers 16] [--kills 3]

Real peer processes on this machine (`satind.ops.launcher`), observed through client connections:
every peer is asked for its own view of the membership (non-deep status) every 50 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import trio

from satind import config, control
from satind.net import tls
from satind.net.transport import Address
from satind.ops.launcher import (
    LOCAL_NODE,
    PeerProcess,
    PeerSpec,
    ephemeral_keys,
    local_peers,
    start_peer,
    wait_bound,
)

ROOT = Path(__file__).resolve().parent.parent


def fast_config(probe_interval: float) -> Path:
    path = Path(tempfile.mkdtemp()) / f"probe-{probe_interval}.toml"
    path.write_text(
        f"[membership]\nprobe_interval_s = {probe_interval}\n"
        f"probe_timeout_s = {probe_interval / 2}\n"
    )
    return path


class Observer:
    """One client connection per peer, asking each for its view."""

    def __init__(self, cfg: config.Config, keys: tls.EphemeralKeys) -> None:
        self.cfg = cfg
        self.credentials = keys.client

    async def view(self, peer: PeerProcess) -> dict[str, str]:
        assert peer.address is not None
        async with control.connect(peer.address, self.cfg, self.credentials, peer.name) as client:
            reply = await client.status(within_s=5, deep=False)
        return {p.name: p.state for p in reply.peers}

    async def until_all(self, peers: list[PeerProcess], about: str, state: str) -> float:
        """Seconds until every live peer other than ``about`` says ``about`` is ``state``."""
        start = trio.current_time()
        pending = {p.name: p for p in peers if p.name != about and p.process.returncode is None}
        while pending:
            for name, peer in list(pending.items()):
                if (await self.view(peer)).get(about) == state:
                    del pending[name]
            await trio.sleep(0.05)
        return trio.current_time() - start


async def detection(peers_n: int, kills: int, probe: float) -> dict[str, float]:
    cfg_file = fast_config(probe)
    cfg = config.load(cfg_file)
    times = []
    keys = ephemeral_keys()
    async with local_peers(peers_n, keys=keys, cfg=cfg) as peers:
        observer = Observer(cfg, keys)
        for k in range(kills):
            victim = peers[1 + k]
            victim.process.kill()
            await victim.process.wait()
            times.append(await observer.until_all(peers, victim.name, "dead"))
    return {
        "probe_interval_s": probe,
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "kills": kills,
    }


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    import os

    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def idle_cpu_and_join(peers_n: int, window: float) -> dict[str, float]:
    cfg = config.DEFAULT
    keys = ephemeral_keys()
    async with local_peers(peers_n, keys=keys, cfg=cfg) as peers:
        await trio.sleep(2)  # let start-up settle
        before = {p.process.pid: cpu_seconds(p.process.pid) for p in peers}
        await trio.sleep(window)
        after = {p.process.pid: cpu_seconds(p.process.pid) for p in peers}
        per_peer = [100 * (after[pid] - before[pid]) / window for pid in before]
        # A joiner: how long until every member knows it.
        observer = Observer(cfg, keys)
        assert peers[0].address is not None
        spec = PeerSpec(
            name=f"{LOCAL_NODE}/{peers_n}",
            cluster="c0",
            listen=Address("127.0.0.1", 0),
            cfg=cfg,
            credentials=keys.node,
            seeds=[peers[0].address],
        )
        started = trio.current_time()
        joiner = await start_peer(spec)
        try:
            await wait_bound(joiner)
            bound = trio.current_time() - started
            known = await observer.until_all(peers, joiner.name, "alive")
        finally:
            joiner.process.kill()
            await joiner.process.wait()
    return {
        "idle_cpu_percent_median": statistics.median(per_peer),
        "idle_cpu_percent_max": max(per_peer),
        "join_known_by_all_s": known,
        "joiner_bind_s": bound,
    }


def steal_rtt(tls_on: bool, repeat: int) -> float | None:
    """Median steal round trip (ms) of 2-peer runs whose leaves spin (victim computing)."""
    from satind.core.stealing import rtt_bucket_names, rtt_median_s

    path = Path(tempfile.mkdtemp()) / "tls.toml"
    path.write_text(f"[net]\ntls = {'true' if tls_on else 'false'}\n")
    hist = [0.0] * len(rtt_bucket_names())
    for _ in range(repeat):
        out = json.loads(
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "satind",
                    "run",
                    "tree",
                    "3",
                    "8",
                    "5",
                    "busy",
                    "--peers",
                    "2",
                    "--json",
                    "--config",
                    str(path),
                ],
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
            ).stdout
        )
        for i, key in enumerate(rtt_bucket_names()):
            hist[i] += out["stats"].get(key, 0)
    median = rtt_median_s(hist)
    return None if median is None else median * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--peers", type=int, default=16)
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--idle-window", type=float, default=20.0)
    args = parser.parse_args()
    print(f"command: python benchmarks/membership.py --peers {args.peers} --kills {args.kills}\n")
    print("## time to agree on a SIGKILLed peer\n")
    print("| probe interval s | median s | min s | max s | kills |")
    print("|---|---|---|---|---|")
    for probe in (0.25, 0.5, 1.0):
        row = trio.run(detection, args.peers, args.kills, probe)
        print(
            f"| {probe} | {row['median_s']:.2f} | {row['min_s']:.2f} | {row['max_s']:.2f} | "
            f"{args.kills} |",
            flush=True,
        )
    idle = trio.run(idle_cpu_and_join, args.peers, args.idle_window)
    print(
        f"\nidle membership CPU per peer ({args.peers} peers, default config, "
        f"{args.idle_window:.0f} s): median {idle['idle_cpu_percent_median']:.2f}% of a core, "
        f"max {idle['idle_cpu_percent_max']:.2f}%"
    )
    print(
        f"joiner known by all {args.peers} members {idle['join_known_by_all_s']:.2f} s after "
        f"it bound its port ({idle['joiner_bind_s']:.2f} s of interpreter start-up before)"
    )
    rtt_tls = steal_rtt(True, 3)
    rtt_tcp = steal_rtt(False, 3)
    print(
        f"\nsteal round trip median (2 peers, tree 3 8 5 busy, 3 runs each): "
        f"TLS {rtt_tls:.2f} ms, plain TCP {rtt_tcp:.2f} ms"
    )


if __name__ == "__main__":
    main()
