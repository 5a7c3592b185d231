"""Gossip membership between real peer processes: 8 peers converge, a SIGKILLed peer is
agreed dead by all others, a peer that leaves is seen as left (not dead)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import trio

from satind import config
from satind.client import client as remote
from satind.net import tls
from satind.net.names import slot_of
from satind.ops.launcher import PeerProcess, ephemeral_keys, local_peers

pytestmark = pytest.mark.slow

FAST = """
[membership]
probe_interval_s = 0.2
probe_timeout_s = 0.1
suspicion_mult = 3
gossip_interval_s = 0.05
"""


async def views(
    peers: list[PeerProcess], cfg: config.Config, keys: tls.EphemeralKeys, about: str
) -> list[str]:
    """What every live peer says of ``about``."""
    credentials = keys.client
    seen = []
    for peer in peers:
        if peer.process.returncode is not None or peer.name == about:
            continue
        assert peer.address is not None
        async with remote.connect(peer.address, cfg, credentials, peer.name) as client:
            reply = await client.status(within_s=5, deep=False)
        seen.append({slot_of(p.name): p.state for p in reply.peers}.get(about, "unknown"))
    return seen


async def test_membership_of_real_processes(tmp_path: Path) -> None:
    cfg_file = tmp_path / "fast.toml"
    cfg_file.write_text(FAST)
    cfg = config.load(cfg_file)
    keys = ephemeral_keys()
    with trio.fail_after(120):
        async with local_peers(8, keys=keys, cfg=cfg) as peers:
            # local_peers returns once every peer sees all 8; check one view in full.
            assert set(await views(peers, cfg, keys, "local/3")) == {"alive"}

            peers[5].process.send_signal(signal.SIGKILL)
            await peers[5].process.wait()
            started = trio.current_time()
            # Other processes' views: polling is the only way to observe them (bounded above).
            while set(await views(peers, cfg, keys, "local/5")) != {"dead"}:  # noqa: ASYNC110
                await trio.sleep(0.2)
            agreed_after = trio.current_time() - started
            assert agreed_after < 20

            # A graceful leave: its control pipe closes, it announces leaving and exits 0.
            await peers[6].ask_to_stop(cfg.launcher.stdin_close_s)
            assert await peers[6].process.wait() == 0
            while set(await views(peers, cfg, keys, "local/6")) != {"left"}:  # noqa: ASYNC110
                await trio.sleep(0.2)
            await trio.sleep(2)  # and it is not later taken for dead
            assert set(await views(peers, cfg, keys, "local/6")) == {"left"}
