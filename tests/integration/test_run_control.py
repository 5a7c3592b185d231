"""An operator steering runs on a real daemon (two peers): `satind cancel` from any peer,
Ctrl-C on `submit --wait` (the run goes on, or is cancelled with --cancel-on-interrupt)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import independent
from tests.integration.test_daemon import Daemon, client, satind, status, wait_for

pytestmark = pytest.mark.slow
LONG = ["tree", "3", "8", "100", "sleep"]  # 6,561 leaves of 100 ms: minutes on two peers
GOOD = ["tree", "3", "5", "10", "sleep"]  # 125 leaves of 10 ms


class System:
    def __init__(self, keys: Path, daemon: Daemon) -> None:
        self.keys = keys
        self.daemon = daemon
        self.addresses = list(daemon.addresses.values())

    def submit(self, *args: str, to: str = "") -> subprocess.Popen[str]:
        where = ["--to", to or self.addresses[0], "--keys", str(self.keys)]
        return subprocess.Popen(
            [sys.executable, "-m", "satind", "submit", *args, *where],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # A test run in the background of a shell inherits SIGINT ignored: give the
            # client the SIGINT a terminal would.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )

    def runs(self) -> list[dict[str, Any]]:
        runs: list[dict[str, Any]] = status(self.keys, self.addresses[0])["runs"]
        return runs

    def running(self, argv: list[str], known: set[str]) -> str:
        """The id of the run of ``argv`` that started after ``known`` ones."""
        found: list[str] = []

        def started() -> bool:
            found[:] = [
                r["run_id"]
                for r in self.runs()
                if [r["plugin"], *r["argv"]] == argv
                and r["state"] == "running"
                and r["run_id"] not in known
            ]
            return bool(found)

        wait_for(started)
        return found[0]

    def state_of(self, run_id: str) -> str:
        return next((r["state"] for r in self.runs() if r["run_id"] == run_id), "unknown")

    def known(self) -> set[str]:
        return {r["run_id"] for r in self.runs()}


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    keys = tmp_path_factory.mktemp("keys")
    assert satind("keys", "init", str(keys)).returncode == 0
    assert satind("keys", "issue", str(keys), "m1").returncode == 0
    daemon = Daemon(keys, "m1", "east")
    try:
        wait_for(
            lambda: (
                len([p for p in status(keys, daemon.first)["peers"] if p["state"] == "alive"]) == 2
            )
        )
        yield System(keys, daemon)
    finally:
        daemon.kill()


def _stopped(proc: subprocess.Popen[str], timeout: float = 30) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


def test_cancel_from_any_peer_stops_the_run_everywhere_and_tells_the_submitter(
    system: System,
) -> None:
    known = system.known()
    waiting = system.submit(*LONG, "--wait")
    try:
        run_id = system.running(LONG, known)
        good = system.submit(*GOOD, "--wait", "--json")
        time.sleep(1.0)  # both runs have jobs on both peers
        # Asked of the peer that is not the master: it relays to the master.
        proc = client(system.keys, system.addresses[1], "cancel", run_id)
        assert proc.returncode == 0, proc.stderr
        assert f"cancelled {run_id}" in proc.stdout
        code, out, err = _stopped(waiting)
        assert code == 1 and "was cancelled" in err and out == ""
        # The other run is untouched and exact.
        code, out, err = _stopped(good, 120)
        assert code == 0, err
        assert json.loads(out)["result"] == independent.tree(3, 5)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
    assert system.state_of(run_id) == "cancelled"
    # Nothing of it is left running: every peer's queue empties and stays empty.
    wait_for(
        lambda: all(p["queue"] == 0 for p in status(system.keys, system.addresses[0])["peers"])
    )
    proc = client(system.keys, system.addresses[0], "result", run_id)
    assert proc.returncode == 1 and "was cancelled" in proc.stderr
    proc = client(system.keys, system.addresses[0], "cancel", run_id)
    assert proc.returncode == 1 and "is over (cancelled)" in proc.stderr
    proc = client(system.keys, system.addresses[0], "cancel", "no-such-run")
    assert proc.returncode == 1 and "no such run" in proc.stderr


def test_ctrl_c_on_submit_wait_leaves_the_run_going_and_says_how_to_cancel_it(
    system: System,
) -> None:
    known = system.known()
    waiting = system.submit(*LONG, "--wait")
    run_id = system.running(LONG, known)
    waiting.send_signal(signal.SIGINT)
    code, _out, err = _stopped(waiting)
    assert code == 130, err
    assert f"satind cancel {run_id}" in err and f"satind result {run_id} --wait" in err
    time.sleep(1.0)
    assert system.state_of(run_id) == "running"
    assert client(system.keys, system.addresses[0], "cancel", run_id).returncode == 0


def test_ctrl_c_with_cancel_on_interrupt_cancels_the_run(system: System) -> None:
    known = system.known()
    waiting = system.submit(*LONG, "--wait", "--cancel-on-interrupt")
    run_id = system.running(LONG, known)
    waiting.send_signal(signal.SIGINT)
    code, _out, err = _stopped(waiting)
    assert code == 130 and f"cancelled {run_id}" in err, err
    assert system.state_of(run_id) == "cancelled"
