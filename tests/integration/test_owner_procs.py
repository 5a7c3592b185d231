"""Volatile workers on a real daemon (issue 34, point 3): with ``[owner] reclaim`` the daemon
reclaims its peer while other processes keep the machine's CPUs busy (the owner at work) and
releases it once they stop; every member sees the peer RECLAIMED, then alive again. The
timings are shortened (the defaults wait 10 s and 30 s); the release threshold is high
because the suite's other worker loads the same machine."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.integration.procs import start_hogs, stop_hogs
from tests.integration.test_daemon import Daemon, satind, status, wait_for

CONFIG = """
[owner]
reclaim = true
reclaim_above = 0.8
reclaim_after_s = 1.0
release_below = 0.7
release_after_s = 1.0
sample_s = 0.25
"""


def test_the_owners_load_reclaims_the_peer_and_its_end_releases_it(tmp_path: Path) -> None:
    keys = tmp_path
    assert satind("keys", "init", str(keys)).returncode == 0
    assert satind("keys", "issue", str(keys), "m1").returncode == 0
    config = keys / "owner.toml"
    config.write_text(CONFIG)
    daemon = Daemon(keys, "m1", "c0", "", "--config", str(config), peers=1)
    hogs: list[subprocess.Popen[bytes]] = []
    try:

        def state() -> str:
            [peer] = status(keys, daemon.first)["peers"]
            return str(peer["state"])

        # The owner: a busy process per CPU, each in its own session (as a user's programs).
        hogs = start_hogs(2)
        wait_for(lambda: state() == "reclaimed", 30.0)
        stop_hogs(hogs)
        hogs = []
        wait_for(lambda: state() == "alive", 60.0)
        log = daemon.log.read_text()
        assert "reclaiming this machine's peers" in log and "releasing" in log, log[-2000:]
    finally:
        stop_hogs(hogs)
        daemon.kill()
