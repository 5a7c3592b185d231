"""A leave that leaves, with real daemons and the shipped defaults (issue 31; §3.3): `satind
drain PEER --deadline 0` of a thief and of the run's master mid-run — the peer's process is
gone within 2 s, its unfinished work is restarted by its owners, what it had finished is
reused, and the answer is exact. Then SIGTERM with `[daemon] on_sigterm = "drain"` and a
short `drain_deadline_s`: the machine's peers leave by the deadline and the run still ends."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path

import pytest

from tests import independent
from tests.integration.procs import alive, free_ports, peer_slot
from tests.integration.test_daemon import (
    Daemon,
    client,
    client_in_background,
    status,
    wait_for,
)

pytestmark = pytest.mark.slow


def _pid(daemon: Daemon, slot: str) -> int:
    return next(pid for pid in daemon.children if peer_slot(pid) == slot)


def _machines(keys: Path, *extra: str) -> tuple[Daemon, Daemon]:
    m1 = Daemon(keys, "m1", "east", "", *extra, listen=f"127.0.0.1:{free_ports(2)}")
    try:
        m2 = Daemon(keys, "m2", "west", m1.first, *extra, listen=f"127.0.0.1:{free_ports(2)}")
    except BaseException:
        m1.kill()
        raise
    return m1, m2


@pytest.mark.parametrize("who", ["thief", "master"])
def test_drain_with_deadline_0_leaves_at_once(keys: Path, who: str) -> None:
    m1, m2 = _machines(keys)
    try:
        wait_for(lambda: sum(p["state"] == "alive" for p in status(keys, m1.first)["peers"]) == 4)
        # The master is the peer the client submits to: m2/0 when it is the one drained.
        to = m2.first if who == "master" else m1.first
        # 24 jobs of 24 leaves of 40 ms: a thief is mostly inside a stolen job with some of
        # its leaves done, which the cut hands over.
        argv = ["submit", "tree", "2", "24", "40", "sleep", "--wait", "--json"]
        submit = client_in_background(keys, to, *argv)
        try:
            wait_for(lambda: any(r["progress"] > 0.3 for r in status(keys, m1.first)["runs"]), 60)
            slot = "m2/0" if who == "master" else "m2/1"
            pid = _pid(m2, slot)
            began = time.monotonic()
            proc = client(keys, m1.first, "drain", slot, "--deadline", "0")
            assert proc.returncode == 0, proc.stderr
            wait_for(lambda: not alive(pid), 10)
            gone_in = time.monotonic() - began
            out, err = submit.communicate(timeout=120)
        finally:
            submit.kill()
        assert gone_in < 2.0 + 1.0, gone_in  # 2 s, plus the drain command's own start-up
        assert submit.returncode == 0, err
        report = json.loads(out)
        assert report["result"] == independent.tree(2, 24) and report["check"] == "ok"
        # What it finished was handed over and reused — when it had finished anything: a
        # peer cut just after it took a job has nothing to hand (it logs what it hands; one
        # in 25 or so here). tests/sim/test_drain_deadline_sim.py shows the reuse
        # deterministically, on its seeds.
        handed = re.search(
            rf"{slot} INFO satind.core.drain: handing \d+ result", m2.log.read_text()
        )
        if handed is not None:
            assert report["stats"]["results_reused"] > 0, report["stats"]
    finally:
        m2.kill()
        m1.kill()


def test_sigterm_drains_with_the_configured_deadline(keys: Path, tmp_path: Path) -> None:
    config = tmp_path / "preemptible.toml"
    config.write_text('[daemon]\non_sigterm = "drain"\ndrain_deadline_s = 0.5\n')
    m1, m2 = _machines(keys, "--config", str(config))
    try:
        wait_for(lambda: sum(p["state"] == "alive" for p in status(keys, m1.first)["peers"]) == 4)
        argv = ["submit", "tree", "3", "8", "40", "sleep", "--wait", "--json"]
        submit = client_in_background(keys, m1.first, *argv)
        try:
            wait_for(lambda: any(r["progress"] > 0.3 for r in status(keys, m1.first)["runs"]), 60)
            pids = list(m2.children)
            began = time.monotonic()
            m2.proc.send_signal(signal.SIGTERM)  # a termination notice
            wait_for(lambda: not any(alive(p) for p in pids), 10)
            gone_in = time.monotonic() - began
            m2.proc.wait(timeout=10)
            out, err = submit.communicate(timeout=120)
        finally:
            submit.kill()
        assert gone_in < 0.5 + 2.0, gone_in
        assert submit.returncode == 0, err
        report = json.loads(out)
        assert report["result"] == independent.tree(3, 8) and report["check"] == "ok"
    finally:
        m2.kill()
        m1.kill()
