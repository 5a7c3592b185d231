"""A careless plugin author and a hostile client against a real daemon (two peers): a spawn
that recurses forever, a job that spawns without bound, a result too large for a message, a
leaf that blocks, a parser and a branching function that raise, a client that never reads,
a frame that never ends. Each costs its own run or connection only: a good run beside it
gives the right answer, and the peers' memory stays bounded."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from satind.net import codec
from satind.net import messages as m
from tests import independent
from tests.integration.procs import alive, kill_all
from tests.integration.test_daemon import Daemon, client_in_background, satind, status, wait_for
from tests.integration.test_recovery_procs import FAST

pytestmark = pytest.mark.slow
PLUGINS = Path(__file__).parent.parent / "data" / "plugins"

# Small caps, so that the limits are met quickly; the client waits (almost) forever, so that
# an answer that comes is an answer, not a timeout.
LIMITS = """
[net]
max_frame_bytes = 1048576
read_timeout_s = 2.0
min_receive_rate = 1000000000.0
max_outbox_bytes = 4194304
max_send_bytes = 16777216
max_client_connections = 4

[engine]
max_pending_jobs = 20000

[client]
timeout_s = 600.0
"""
GOOD = ["tree", "3", "5", "10", "sleep"]  # 125 leaves of 10 ms


class System:
    def __init__(self, keys: Path, daemon: Daemon, config: Path) -> None:
        self.keys = keys
        self.daemon = daemon
        self.config = config

    @property
    def to(self) -> str:
        return self.daemon.first

    def args(self, *args: str) -> list[str]:
        return [*args, "--to", self.to, "--keys", str(self.keys), "--config", str(self.config)]

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return satind(*self.args(*args), timeout=timeout)

    def background(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "satind", *self.args(*args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def good_run(self) -> subprocess.Popen[str]:
        return self.background("submit", *GOOD, "--wait", "--json")


def _good_result(proc: subprocess.Popen[str]) -> None:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out)["result"] == independent.tree(3, 5)


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    keys = tmp_path_factory.mktemp("keys")
    assert satind("keys", "init", str(keys)).returncode == 0
    assert satind("keys", "issue", str(keys), "m1").returncode == 0
    config = keys / "limits.toml"
    config.write_text(LIMITS)
    daemon = Daemon(keys, "m1", "east", "", "--plugin-path", str(PLUGINS), "--config", str(config))
    try:
        wait_for(
            lambda: (
                len([p for p in status(keys, daemon.first)["peers"] if p["state"] == "alive"]) == 2
            )
        )
        yield System(keys, daemon, config)
    finally:
        daemon.kill()


def test_a_runaway_spawn_fails_its_run_and_a_good_run_beside_it_finishes(system: System) -> None:
    good = system.good_run()
    proc = system.run("submit", "runaway", "--wait")
    assert proc.returncode == 1, proc.stderr
    assert "engine.recursion_limit" in proc.stderr
    _good_result(good)
    _good_result(system.good_run())  # and the peers go on serving runs


def test_a_job_spawning_without_bound_fails_its_run(system: System) -> None:
    good = system.good_run()
    proc = system.run("submit", "flood", "100000", "--wait")
    assert proc.returncode == 1, proc.stderr
    assert "engine.max_pending_jobs" in proc.stderr
    _good_result(good)


def test_a_result_too_large_for_a_message_fails_its_run_with_a_clear_error(
    system: System,
) -> None:
    good = system.good_run()
    proc = system.run("submit", "bigresult", str(2 * 1024 * 1024), "--wait")
    assert proc.returncode == 1, proc.stderr
    assert "net.max_frame_bytes" in proc.stderr
    _good_result(good)


def test_a_blocking_leaf_does_not_hold_a_good_run_hostage(system: System) -> None:
    # A leaf blocks for 8 s on the peer both runs are submitted to. The good run, submitted
    # while it blocks, must not wait for it: its root is stolen by the other peer, and its
    # result comes back to a peer whose compute thread is stuck. Before, the root waited in
    # the stuck thread's mailbox, and its result as well: the good run took 8 s.
    blocked = system.background("submit", "blocking", "8", "0", "--wait")
    try:
        wait_for(
            lambda: any(r["state"] == "running" for r in status(system.keys, system.to)["runs"])
        )
        time.sleep(1.0)  # the blocking leaf has started on one of the peers
        _good_result(system.good_run())
        assert blocked.poll() is None, "the good run waited for the blocking leaf"
        _out, err = blocked.communicate(timeout=120)
        assert blocked.returncode == 0, err
    finally:
        blocked.kill()


def test_a_plugin_whose_parse_or_branching_raises_gets_an_answer_not_a_timeout(
    system: System,
) -> None:
    # The client has no copy of the plugin: the peer parses, fails, and says why at once.
    proc = system.run("submit", "badparse", "x", timeout=60)
    assert proc.returncode == 1 and "KeyError" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    proc = system.run("submit", "badbranching", "3", timeout=60)
    assert proc.returncode == 1 and "max_branching" in proc.stderr, proc.stderr


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _tls(system: System, host: str, port: int) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=str(system.keys / "ca.pem"))
    ctx.check_hostname = False
    ctx.load_cert_chain(str(system.keys / "client.pem"), str(system.keys / "client.key"))
    sock = ctx.wrap_socket(socket.create_connection((host, port), timeout=10))
    hello = m.Hello(m.PROTOCOL_VERSION, "client~hostile", "", "client")
    sock.sendall(codec.frame(codec.encode_message(hello)))
    return sock


def test_a_client_that_never_reads_and_a_frame_that_never_ends_cost_bounded_memory(
    system: System,
) -> None:
    _name, address = next(iter(system.daemon.addresses.items()))
    host, port = address.rsplit(":", 1)
    pid = system.daemon.children[0]
    before = _rss_mb(pid)
    # A client that asks and never reads: its replies pile up in the peer until the
    # connection's outbox cap (4 MiB here), then the peer closes the connection.
    request = codec.frame(codec.encode_message(m.StatusRequest(1, True)))
    closed = False
    with _tls(system, host, int(port)) as sock:
        sock.settimeout(30)
        try:
            for _ in range(200_000):
                sock.sendall(request * 64)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, TimeoutError):
            closed = True
    assert closed, "the peer kept queueing replies for a client that never reads"
    # A frame that announces 900 KB and never ends: cut off after read_timeout_s (2 s).
    with _tls(system, host, int(port)) as sock:
        sock.sendall(codec.FRAME_HEADER.pack(900_000) + b"\x00" * 100_000)
        sock.settimeout(30)
        started = time.monotonic()
        try:
            while sock.recv(65536):
                pass
        except (ConnectionResetError, ssl.SSLError):
            pass
        assert time.monotonic() - started < 25, "the half-sent frame was held"
    # Bounded: the outbox cap plus the receive budget of this config, with room for the
    # allocator keeping what it freed.
    assert _rss_mb(pid) - before < 64, (before, _rss_mb(pid))
    # The peer still serves.
    assert status(system.keys, system.to)["peers"]


def test_connections_per_client_are_capped(system: System) -> None:
    _name, address = next(iter(system.daemon.addresses.items()))
    host, port = address.rsplit(":", 1)
    socks = [_tls(system, host, int(port)) for _ in range(6)]
    try:
        refused = 0
        for sock in socks:
            sock.settimeout(1)
            data = b""
            try:
                while chunk := sock.recv(65536):
                    data += chunk
                    if b"too many connections" in data:
                        break
            except TimeoutError:
                continue  # kept open: one of the allowed ones
            except (ConnectionResetError, ssl.SSLError):
                pass
            refused += 1
        assert refused == 2  # max_client_connections = 4: the two idle longest made room
    finally:
        for sock in socks:
            sock.close()


def test_submit_wait_follows_its_run_when_the_master_is_killed(
    tmp_path: Path,
) -> None:
    assert satind("keys", "init", str(tmp_path)).returncode == 0
    assert satind("keys", "issue", str(tmp_path), "m1").returncode == 0
    assert satind("keys", "issue", str(tmp_path), "m2").returncode == 0
    fast = tmp_path / "fast.toml"  # deaths found in about a second
    fast.write_text(FAST)
    m1 = Daemon(tmp_path, "m1", "east", "", "--config", str(fast))
    m2 = Daemon(tmp_path, "m2", "west", m1.first, "--config", str(fast))
    try:
        wait_for(
            lambda: (
                len([p for p in status(tmp_path, m1.first)["peers"] if p["state"] == "alive"]) == 4
            )
        )
        # The run's master is the peer the client submits to: m1/0.
        submit = client_in_background(
            tmp_path, m1.first, "submit", "tree", "3", "7", "40", "sleep", "--wait", "--json"
        )
        try:
            wait_for(lambda: any(r["progress"] > 0.1 for r in status(tmp_path, m2.first)["runs"]))
            kill_all([m1.children[0]])  # SIGKILL the master
            out, err = submit.communicate(timeout=180)
        finally:
            submit.kill()
        assert submit.returncode == 0, err
        assert json.loads(out)["result"] == independent.tree(3, 7)
        assert "following run" in err
    finally:
        m1.kill()
        m2.kill()


def test_satind_run_killed_leaves_no_key_material(tmp_path: Path) -> None:
    env = {"TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "satind", "run", "tree", "2", "2", "60000", "sleep", "--peers", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    from tests.integration.procs import children_of, peers_of

    try:
        wait_for(lambda: len(peers_of(proc.pid)) == 2, 30)
        peers = peers_of(proc.pid)
        time.sleep(1.0)  # the run is going
        kill_all([proc.pid])
        proc.wait(timeout=10)
        wait_for(lambda: not any(alive(p) for p in peers), 20)
    finally:
        proc.kill()
        kill_all(children_of(proc.pid))
    left = [str(p) for p in tmp_path.rglob("*")]
    assert left == [], left
