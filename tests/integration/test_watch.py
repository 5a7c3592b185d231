"""`satind status --watch` on a terminal (a pty) follows the cluster: when the peer it talks
to is lost, it moves to another member of the last view and goes on."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.test_daemon import Daemon, status, wait_for

pytestmark = pytest.mark.slow


def _read_until(fd: int, needle: str, limit: float = 60.0) -> str:
    seen = ""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and needle not in seen:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                seen += os.read(fd, 65536).decode(errors="replace")
            except OSError:
                break
    return seen


def test_status_watch_moves_to_another_peer_when_its_own_is_lost(
    keys: Path, two_machines: tuple[Daemon, Daemon]
) -> None:
    m1, m2 = two_machines
    wait_for(lambda: len(status(keys, m2.first)["peers"]) == 4)
    main, child = os.openpty()
    env = {**os.environ, "COLUMNS": "80", "LINES": "40", "TERM": "xterm"}
    where = ["--to", m1.first, "--keys", str(keys)]
    watch = subprocess.Popen(
        [sys.executable, "-m", "satind", "status", "--watch", *where],
        stdin=child,
        stdout=child,
        stderr=child,
        env=env,
    )
    os.close(child)
    try:
        screen = _read_until(main, "m2/1")
        assert "peers" in screen and "m2/1" in screen, screen
        assert "checkpoint" not in screen  # the narrow table fits 80 columns
        m1.kill()  # the peer it watches through, and its machine
        screen = _read_until(main, "now watching through m2/")
        assert "now watching through m2/" in screen, screen[-2000:]
        assert watch.poll() is None  # still watching
    finally:
        watch.kill()
        watch.wait(timeout=10)
        os.close(main)
