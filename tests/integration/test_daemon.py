"""Two "machines" (two `satind start`, two clusters) on loopback: they find each other over
mutual TLS, run a submitted plugin, show status, drain a peer, shrug off an intruder's garbage
and stop cleanly."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from satind.client import api
from satind.client import client as remote
from satind.client.errors import SatindError, VersionMismatch
from satind.node.status import status_json
from tests import independent
from tests.integration.procs import alive, children_of, free_ports, kill_all, peer_slot

pytestmark = pytest.mark.slow
DATA = Path(__file__).parent.parent / "data"


def satind(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "satind", *args], capture_output=True, text=True, timeout=timeout
    )


class Daemon:
    def __init__(
        self,
        keys: Path,
        name: str,
        cluster: str,
        seeds: str = "",
        *extra: str,
        cwd: Path | None = None,
        listen: str = "127.0.0.1:0",
        peers: int = 2,
    ) -> None:
        """``listen``: peer 0's address, peer i at its port + i; a fixed port is the
        production setup (a restarted peer is back at the same address), 0 any free ports."""
        self.name = name
        cmd = [
            sys.executable,
            "-m",
            "satind",
            "start",
            "--keys",
            str(keys),
            "--name",
            name,
            "--cluster",
            cluster,
            "--listen",
            listen,
            "--peers",
            str(peers),
            *extra,
        ]
        if seeds:
            cmd += ["--seeds", seeds]
        self.log = Path(keys) / f"{name}.log"
        # Its run history and remembered members beside the keys, not in the user's
        # ~/.local/state (tests/conftest.py does so for a test's own environment; a daemon of
        # a module's fixture starts before it applies). The same keys and name: the same
        # state, as a daemon restarted on one machine has.
        env = {**os.environ, "XDG_STATE_HOME": str(Path(keys).parent / f"{Path(keys).name}-state")}
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=self.log.open("w"), cwd=cwd, env=env
        )
        self.children: list[int] = []
        try:
            self.addresses = self._wait_for_addresses(name)
        except AssertionError:
            self.kill()  # not left running when it did not start in time
            raise
        # Its peers at the start, by slot (m1/0 first), not the template they are forked from.
        self.children = [pid for _, pid in sorted(self.peers().items(), key=_slot_index)]

    def _wait_for_addresses(self, name: str) -> dict[str, str]:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            text = self.log.read_text()
            found = re.search(rf"satind {name} \(cluster \w+\): (.*)", text)
            if found:
                return dict(part.split("=") for part in found.group(1).split(", "))
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon {name} exited: {text}")
            time.sleep(0.1)
        raise AssertionError(f"daemon {name} did not start: {self.log.read_text()}")

    @property
    def first(self) -> str:
        return next(iter(self.addresses.values()))

    def pid_of(self, slot: str, limit: float = 30.0) -> int:
        """The process running in ``slot`` (m1/0) now: after a restart, the new one."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            pid = self.peers().get(slot)
            if pid is not None:
                return pid
            time.sleep(0.05)
        raise AssertionError(f"no process in slot {slot}")

    def peers(self) -> dict[str, int]:
        """Slot -> pid of the peer processes the daemon runs now (a zombie it has not reaped
        yet has no command line, so a killed peer is not among them; nothing once the daemon
        is gone)."""
        found = {}
        for pid in self._children():
            slot = peer_slot(pid)
            if slot is not None:
                found[slot] = pid
        return found

    def _children(self) -> list[int]:
        # Only while the daemon is not reaped: after that its pid may be another process's.
        return children_of(self.proc.pid) if self.proc.poll() is None else []

    def kill(self) -> None:
        """SIGKILL the daemon and its peers, by pid. Only the peers it runs now are killed, and
        those it started with that are still its own: a pid from an earlier listing may name
        another process by now (a peer killed and restarted; pids are reused)."""
        peers = set(self._children()) | {pid for pid in self.children if self.runs(pid)}
        self.proc.kill()
        self.proc.wait()
        kill_all(sorted(peers))

    def runs(self, pid: int) -> bool:
        """Whether ``pid`` is a peer process in one of this daemon's slots (its child, or one
        that outlived it)."""
        slot = peer_slot(pid)
        return slot is not None and slot.startswith(f"{self.name}/")


def _slot_index(item: tuple[str, int]) -> int:
    return int(item[0].rpartition("/")[2])


def client(
    keys: Path, to: str, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return satind(*args, "--to", to, "--keys", str(keys), timeout=timeout)


def client_in_background(keys: Path, to: str, *args: str) -> subprocess.Popen[str]:
    """A client command left running (e.g. `submit --wait`); the caller collects it."""
    return subprocess.Popen(
        [sys.executable, "-m", "satind", *args, "--to", to, "--keys", str(keys)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def status(keys: Path, to: str) -> dict[str, Any]:
    """What `satind status --json --to TO --keys KEYS` prints, asked from this process through
    the client API the command is made of. A command per poll cost half a CPU-second of
    imports, and wait_for polls five times a second beside daemons that need the CPU."""

    async def ask() -> dict[str, Any]:
        where = api.target(to, keys)
        with trio.fail_after(60):
            credentials = where.credentials if where.cfg.net.tls else None
            async with remote.connect(where.address, where.cfg, credentials) as peer:
                return status_json(await peer.status())

    try:
        asked = trio.run(ask)
    except (SatindError, OSError, trio.TooSlowError) as exc:
        # As the command's failure: callers polling a peer that is not back yet expect it.
        raise AssertionError(f"status from {to}: {exc}") from exc
    out: dict[str, Any] = json.loads(json.dumps(asked))
    return out


def status_cli(keys: Path, to: str) -> dict[str, Any]:
    """The same from the command itself (test_two_machines_run_status_drain_and_stop keeps the
    two equal)."""
    proc = client(keys, to, "status", "--json")
    assert proc.returncode == 0, proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def wait_for(predicate: Any, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError("condition not reached")


def test_two_machines_run_status_drain_and_stop(
    keys: Path, two_machines: tuple[Daemon, Daemon]
) -> None:
    m1, m2 = two_machines
    wait_for(
        lambda: len([p for p in status(keys, m2.first)["peers"] if p["state"] == "alive"]) == 4
    )
    peers = {p["slot"]: p for p in status(keys, m1.first)["peers"]}
    # The command prints what the tests' in-process helper gives (but for the peers' clocks).
    assert {p["slot"]: p["cluster"] for p in status_cli(keys, m1.first)["peers"]} == {
        n: p["cluster"] for n, p in peers.items()
    }
    assert status_cli(keys, m1.first).keys() == status(keys, m1.first).keys()
    assert {n: p["cluster"] for n, p in peers.items()} == {
        "m1/0": "east",
        "m1/1": "east",
        "m2/0": "west",
        "m2/1": "west",
    }

    # A run submitted on one machine uses both and gives the right answer.
    proc = client(keys, m2.first, "submit", "tree", "3", "4", "20", "sleep", "--wait", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["check"] == "ok" and out["peers"] == 4
    assert out["stats"]["jobs_run"] == out["stats"]["spawns"] + 1
    assert out["stats"]["stolen_wide"] + out["stats"]["stolen_local"] > 0

    # `submit` without --wait gives a run id; `result --wait` from the other machine fetches it.
    proc = client(keys, m1.first, "submit", "fib", "25", "15")
    run_id = proc.stdout.strip()
    assert proc.returncode == 0 and re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{6}", run_id), proc.stdout
    proc = client(keys, m2.first, "result", run_id, "--wait", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"] == 75025
    runs = {r["run_id"]: r for r in status(keys, m1.first)["runs"]}
    assert runs[run_id]["state"] == "done" and runs[run_id]["progress"] == 1.0

    # An intruder's garbage costs one connection; the system goes on.
    host, port = m1.first.split(":")
    for data in (b"\x00" * 64, b"\x16\x03\x01\xff\xff" + b"A" * 200, b"GET / HTTP/1.0\r\n\r\n"):
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(data)
            sock.settimeout(10)
            try:
                while sock.recv(4096):
                    pass
            except (ConnectionResetError, TimeoutError):
                pass
    proc = client(keys, m1.first, "submit", "nqueens", "8", "--wait", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["result"] == 92

    # Drain one peer: it finishes, leaves, and is seen as left (not dead).
    proc = client(keys, m1.first, "drain", "m2/1")
    assert proc.returncode == 0, proc.stderr
    wait_for(
        lambda: {p["slot"]: p["state"] for p in status(keys, m1.first)["peers"]}["m2/1"] == "left"
    )
    proc = client(keys, m1.first, "drain", "nobody/9")
    assert proc.returncode == 1 and "no live peer nobody/9" in proc.stderr

    # Stop everything: both daemons exit by themselves, and nothing is left running.
    children = m1.children + m2.children
    proc = client(keys, m1.first, "stop", "--all")
    assert proc.returncode == 0, proc.stderr
    assert m1.proc.wait(timeout=30) == 0 and m2.proc.wait(timeout=30) == 0
    wait_for(lambda: not any(alive(p) for p in children), 10)


def test_other_plugin_versions_refuse_the_run(keys: Path, tmp_path: Path) -> None:
    one, two = tmp_path / "v1", tmp_path / "v2"
    for directory, body in ((one, "x * 2"), (two, "x + x")):
        directory.mkdir()
        (directory / "double.py").write_text(
            "from satind import Plugin, spawnable\n"
            "@spawnable\n"
            f"def double(x: int) -> int:\n    return {body}\n"
            "PLUGIN = Plugin(name='double', entry=double, usage='double X',\n"
            "                parse=lambda argv: (int(argv[0]),))\n"
        )
    m1 = Daemon(keys, "m1", "east", "", "--plugin-path", str(one))
    m2 = Daemon(keys, "m2", "west", m1.first, "--plugin-path", str(two))
    try:
        wait_for(
            lambda: len([p for p in status(keys, m1.first)["peers"] if p["state"] == "alive"]) == 4
        )
        proc = client(keys, m1.first, "submit", "double", "21", "--wait")
        # A usage error (2): the plugin directories are to fix; a retry would not help.
        assert proc.returncode == 2, proc.stderr
        assert "run refused" in proc.stderr and "peer m2/" in proc.stderr
        assert "code hash" in proc.stderr and "to fix:" in proc.stderr

        async def submit() -> None:
            async with api.open_cluster(m1.first, keys) as cluster:
                with pytest.raises(VersionMismatch, match="code hash"):
                    await cluster.submit("double", "21")

        trio.run(submit)
    finally:
        m1.kill()
        m2.kill()


def test_client_errors_are_clear(keys: Path) -> None:
    proc = satind("status", "--to", "127.0.0.1:1", "--keys", str(keys))
    assert proc.returncode == 3 and "cannot connect" in proc.stderr
    proc = satind("status", "--to", "nonsense", "--keys", str(keys))
    assert proc.returncode == 2 and "HOST:PORT" in proc.stderr
    proc = satind("start", "--keys", str(keys), "--name", "m9", "--listen", "127.0.0.1:0")
    assert proc.returncode == 2 and "satind keys issue" in proc.stderr
    (keys / "m1.key").chmod(0o644)
    proc = satind("start", "--keys", str(keys), "--name", "m1", "--listen", "127.0.0.1:0")
    assert proc.returncode == 2 and "chmod 600" in proc.stderr


@pytest.mark.parametrize("slot", ["m1/0", "m1/1"])
def test_the_supervisor_restarts_a_crashed_peer(keys: Path, slot: str) -> None:
    # A machine with no seeds, as the first one is, on fixed ports: a restarted peer 0 has
    # only its siblings to join through (before it was given them, it stayed alone for good:
    # it saw only itself, and the other peer saw no m1/0 alive).
    m1 = Daemon(keys, "m1", "east", listen=f"127.0.0.1:{free_ports(2)}")

    def alive_seen_from(to: str) -> set[str]:
        try:
            return {p["slot"] for p in status(keys, to)["peers"] if p["state"] == "alive"}
        except AssertionError:  # not answering (yet)
            return set()

    try:
        both = set(m1.addresses)
        wait_for(lambda: alive_seen_from(m1.first) == both)
        victim = m1.pid_of(slot)
        os.kill(victim, signal.SIGKILL)
        # A new process takes its place (after daemon.restart_delay_s), under the same name,
        # at the same address, as a newer instance that the other peer accepts.
        wait_for(lambda: m1.peers().get(slot, victim) != victim)
        wait_for(lambda: all(alive_seen_from(to) == both for to in m1.addresses.values()))
        assert "restarting" in m1.log.read_text()
        proc = client(keys, m1.first, "submit", "fib", "20", "12", "--wait", "--json")
        assert proc.returncode == 0 and json.loads(proc.stdout)["result"] == 6765
        children = children_of(m1.proc.pid)
        assert client(keys, m1.first, "stop").returncode == 0
        assert m1.proc.wait(timeout=30) == 0
        wait_for(lambda: not any(alive(p) for p in children), 10)
    finally:
        m1.kill()


def test_draining_a_cluster_mid_run_loses_no_work_and_stop_drain_ends_the_daemon(
    keys: Path, two_machines: tuple[Daemon, Daemon]
) -> None:
    m1, m2 = two_machines
    wait_for(
        lambda: len([p for p in status(keys, m1.first)["peers"] if p["state"] == "alive"]) == 4
    )
    # 512 leaves of 60 ms: about 8 s on 4 peers. The master is on m1 (the run goes there).
    argv = ["submit", "tree", "3", "8", "60", "sleep", "--wait", "--json"]
    submit = client_in_background(keys, m1.first, *argv)
    try:
        wait_for(lambda: any(r["progress"] > 0.1 for r in status(keys, m1.first)["runs"]), 30)
        # Migration away from machine m2: drain its cluster in the middle of the run.
        proc = client(keys, m1.first, "drain", "--cluster", "west")
        assert proc.returncode == 0 and "draining 2 peer(s)" in proc.stdout, proc.stderr
        out, err = submit.communicate(timeout=120)
    finally:
        submit.kill()
    assert submit.returncode == 0, err
    report = json.loads(out)
    assert report["result"] == independent.tree(3, 8) and report["check"] == "ok"
    # A graceful leave: nothing was lost, so nothing was restarted.
    assert report["stats"]["jobs_restarted"] == 0
    # m2's peers left; its supervisor exits by itself, cleanly.
    assert m2.proc.wait(timeout=30) == 0
    states = {p["slot"]: p["state"] for p in status(keys, m1.first)["peers"]}
    assert states["m2/0"] == states["m2/1"] == "left"
    # `stop --drain` takes m1 down the same way.
    proc = client(keys, m1.first, "stop", "--drain")
    assert proc.returncode == 0 and "draining 2 peer(s)" in proc.stdout, proc.stderr
    assert m1.proc.wait(timeout=30) == 0
    wait_for(lambda: not any(alive(p) for p in m1.children + m2.children), 10)
