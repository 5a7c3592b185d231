"""A restarted peer whose port is still held (ops/daemon.py): the daemon waits for the port
with its back-off, saying who holds it, instead of exiting 2, which systemd's
RestartPreventExitStatus=2 would make the machine's end (issue 45). The usual holder is a
process the killed peer left behind: a plugin's job that forked a child keeps every file of
the peer open in it, its listening sockets among them. Only at the daemon's first start is a
port in use a misconfiguration that stops it (exit 2)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from satind.ops import ports
from tests.integration.procs import alive, kill_all, ports_below_ephemeral
from tests.integration.test_daemon import Daemon, client, satind, status, wait_for

pytestmark = pytest.mark.slow

# A job that forks a child which outlives its peer (bounded: two minutes at most), as a
# plugin that forks a pool of workers would; the child's pid goes to the file it is given.
FORKER = """
import os
import time

from satind import Plugin, spawnable


@spawnable
def forker(path: str) -> int:
    pid = os.fork()
    if pid == 0:  # the child: only sleeps, then leaves without running any cleanup
        try:
            time.sleep(120)
        finally:
            os._exit(0)
    with open(path, "w") as out:
        out.write(str(pid))
    return pid


PLUGIN_FORKER = Plugin(
    name="forker", entry=forker, usage="forker FILE", parse=lambda argv: (argv[0],)
)
"""


def serves(keys: Path, daemon: Daemon, peers: int) -> bool:
    """Whether the daemon's first peer answers a status with ``peers`` members (not yet, while
    a restart is under way)."""
    try:
        return len(status(keys, daemon.first)["peers"]) == peers
    except AssertionError:
        return False


def test_a_restart_waits_while_a_plugins_forked_child_holds_the_port(
    keys: Path, tmp_path: Path
) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "forker.py").write_text(FORKER)
    port = ports_below_ephemeral(1)
    daemon = Daemon(
        keys, "m1", "east", "", "--plugin-path", str(plugins), listen=f"127.0.0.1:{port}", peers=1
    )
    grandchild = 0
    try:
        wait_for(lambda: len(status(keys, daemon.first)["peers"]) == 1)
        made = tmp_path / "grandchild.pid"
        proc = client(keys, daemon.first, "submit", "forker", str(made), "--wait")
        assert proc.returncode == 0, proc.stderr
        grandchild = int(made.read_text())
        peer = daemon.pid_of("m1/0")
        assert {peer, grandchild} <= set(ports.holders([port]))  # it has the socket too
        kill_all([peer])
        wait_for(lambda: "port is still held" in daemon.log.read_text())
        log = daemon.log.read_text()
        assert f"peer m1/0 cannot listen yet, its port is still held by pid {grandchild} (" in log
        assert "Address already in use" in log or "address already in use" in log
        assert daemon.proc.poll() is None and "m1/0" not in daemon.peers()
        kill_all([grandchild])
        wait_for(lambda: not alive(grandchild))
        # Back within the back-off (1, 2, 4, 8 s...): a new instance in the slot, serving.
        wait_for(lambda: serves(keys, daemon, 1), 60)
        assert daemon.peers()["m1/0"] != peer
        assert daemon.proc.poll() is None
        assert "stopping every peer" not in daemon.log.read_text()
    finally:
        if grandchild:
            kill_all([grandchild])
        daemon.kill()


def test_a_restart_waits_while_another_process_holds_the_port_and_names_it(
    keys: Path,
) -> None:
    port = ports_below_ephemeral(2)
    daemon = Daemon(keys, "m1", "east", "", listen=f"127.0.0.1:{port}")
    squatter = socket.socket()
    try:
        wait_for(lambda: len(status(keys, daemon.first)["peers"]) == 2)
        victim = daemon.pid_of("m1/1")
        kill_all([victim])
        wait_for(lambda: not alive(victim), 10)
        # Taken before the restart (restart_delay_s, 1 s): the killed peer's socket may
        # linger a moment in the kernel, so a few tries.
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        for _ in range(50):
            try:
                squatter.bind(("127.0.0.1", port + 1))
                break
            except OSError:
                time.sleep(0.02)
        else:
            raise AssertionError("the killed peer's port stayed bound")
        squatter.listen()
        held = f"peer m1/1 cannot listen yet, its port is still held by pid {os.getpid()}"
        wait_for(lambda: held in daemon.log.read_text())
        assert daemon.proc.poll() is None
        squatter.close()
        wait_for(lambda: serves(keys, daemon, 2) and "m1/1" in daemon.peers(), 60)
        assert daemon.peers()["m1/1"] != victim
        assert daemon.proc.poll() is None
    finally:
        squatter.close()
        daemon.kill()


def test_at_the_first_start_a_port_in_use_stops_the_daemon_with_exit_2(keys: Path) -> None:
    port = ports_below_ephemeral(1)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        proc = satind(
            "start", "--keys", str(keys), "--name", "m1", "--cluster", "east",
            "--listen", f"127.0.0.1:{port}", "--peers", "1",
        )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "cannot listen" in proc.stderr and "m1/0" in proc.stderr
