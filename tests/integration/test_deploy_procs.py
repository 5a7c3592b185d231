"""What the deployment recipes (configs/, docs/deploy.md) rely on, on real daemons on
loopback: `satind ready` as a readiness probe, a seed given by host name, and SIGTERM with
`--on-sigterm drain --drain-deadline S` stopping a machine within its deadline."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.procs import alive, free_ports
from tests.integration.test_daemon import Daemon, client, satind, status

pytestmark = pytest.mark.slow


def ready(keys: Path, to: str, *args: str) -> subprocess.CompletedProcess[str]:
    # The probe's own client certificate: no operate grant is needed.
    return client(keys, to, "ready", "--as", "probe", "--timeout", "10", *args)


def until_ready(keys: Path, to: str, *args: str, limit: float = 30.0) -> str:
    deadline = time.monotonic() + limit
    while True:
        proc = ready(keys, to, *args)
        if proc.returncode == 0:
            return proc.stdout.strip()
        assert proc.returncode == 1, proc.stderr
        assert time.monotonic() < deadline, proc.stderr
        time.sleep(0.3)


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    assert satind("keys", "init", str(tmp_path)).returncode == 0
    for name in ("m1", "m2", "m3"):
        assert satind("keys", "issue", str(tmp_path), name).returncode == 0
    assert satind("keys", "issue", str(tmp_path), "probe", "--client").returncode == 0
    return tmp_path


def test_ready_says_when_a_machine_is_up_and_joined(keys: Path) -> None:
    daemons: list[Daemon] = []
    try:
        m1 = Daemon(keys, "m1", "east")
        daemons.append(m1)
        assert until_ready(keys, m1.first, "--peers", "2") == (
            "ready: m1/0 joined; 2 peers of m1 up; 2 members up"
        )
        proc = ready(keys, m1.first, "--peers", "3")
        assert (proc.returncode, proc.stderr.strip()) == (
            1,
            "not ready: 2 of 3 peers of m1 are up",
        )
        proc = ready(keys, m1.first, "--members", "4")
        assert (proc.returncode, proc.stderr.strip()) == (1, "not ready: 2 of 4 members are up")

        # A second machine seeded by a host name (what a headless Service or a Compose
        # service name is): it resolves, and the join goes to the address it gives.
        port = m1.first.rsplit(":", 1)[1]
        m2 = Daemon(keys, "m2", "west", f"localhost:{port}")
        daemons.append(m2)
        assert until_ready(keys, m2.first, "--peers", "2", "--members", "4") == (
            "ready: m2/0 joined; 2 peers of m2 up; 4 members up"
        )

        # A machine whose seed never answers has not joined: not ready, and it says why.
        nobody = free_ports(1)
        m3 = Daemon(keys, "m3", "north", f"127.0.0.1:{nobody}", peers=1)
        daemons.append(m3)
        proc = ready(keys, m3.first)
        assert (proc.returncode, proc.stderr.strip()) == (
            1,
            "not ready: m3/0 has not joined the system: its seeds have not answered (see its log)",
        )
    finally:
        for daemon in daemons:
            daemon.kill()
    # No peer answers any more: not ready, with the reason.
    proc = ready(keys, m1.first)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"not ready: cannot connect to {m1.first}"), proc.stderr


def test_sigterm_drains_a_machine_within_its_deadline(keys: Path) -> None:
    """The stop of systemd, Docker and Kubernetes: SIGTERM to the daemon, which drains its
    peers for at most --drain-deadline, then exits 0 with every peer gone."""
    m1 = Daemon(keys, "m1", "east")
    m2 = Daemon(keys, "m2", "west", m1.first, "--on-sigterm", "drain", "--drain-deadline", "5")
    try:
        until_ready(keys, m1.first, "--members", "4")
        peers = list(m2.peers().values())
        assert len(peers) == 2
        sent = time.monotonic()
        m2.proc.send_signal(signal.SIGTERM)
        assert m2.proc.wait(timeout=60) == 0
        took = time.monotonic() - sent
        assert not any(alive(pid) for pid in peers)
        # Nothing to finish: the drain did not wait for its deadline (timing is not asserted
        # beyond that bound; docs/benchmarks.md has the numbers).
        assert took < 5 + 30, took
        assert "SIGTERM: stopping every peer" in m2.log.read_text()
        states = {
            p["slot"]: p["state"]
            for p in status(keys, m1.first)["peers"]
            if p["slot"].startswith("m2/")
        }
        assert states == {"m2/0": "left", "m2/1": "left"}, states
    finally:
        m2.kill()
        m1.kill()
