"""Iterative master-worker runs on real peer processes (scheduling-iterative-apps-volatile-
resources; satind/iterative.py, core/iterative.py): k-means gives the sequential answer bit for
bit on local peers; on daemons, with a worker reclaimed then released and another SIGKILLed
mid-iteration; and when its master is SIGKILLed (a new master resumes from the last barrier)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.procs import kill_all
from tests.integration.test_daemon import (
    Daemon,
    client,
    client_in_background,
    satind,
    status,
    wait_for,
)
from tests.integration.test_recovery_procs import FAST
from tests.integration.test_run import run_json

pytestmark = pytest.mark.slow

KMEANS = ["kmeans", "60000", "6", "12", "3", "40"]

# An iterative plugin written from docs/plugins.md: a power iteration x <- A x (mod a prime) on
# a seeded sparse matrix, a fixed number of iterations, one task per block of rows. Each task
# also sleeps (an emulated slow worker), so a run lasts long enough to be interfered with.
POWER = """
import random
import time

from satind import UsageError, iterative_plugin

P = 1_000_003


def matrix(n, seed):
    rng = random.Random(seed)
    return [[(rng.randrange(n), rng.randrange(1, P)) for _ in range(4)] for _ in range(n)]


def parse(argv):
    if len(argv) != 4:
        raise UsageError("give N BLOCKS ITERATIONS TASK_MS")
    return tuple(int(a) for a in argv)


def initial(args):
    return [1] * args[0]


def tasks(args, x, iteration):
    n, blocks = args[0], args[1]
    return [[b * n // blocks, (b + 1) * n // blocks, x] for b in range(blocks)]


def task(args, item):
    start, stop, x = item
    rows = matrix(args[0], 7)
    time.sleep(args[3] / 1000)
    return [sum(a * x[j] for j, a in rows[i]) % P for i in range(start, stop)]


def combine(args, x, results, iteration):
    return [v for block in results for v in block]


def done(args, x, iterations):
    return iterations >= args[2]


def sequential(args):
    x, it = initial(args), 0
    while not done(args, x, it):
        x = combine(args, x, [task(args, t) for t in tasks(args, x, it)], it)
        it += 1
    return x


def check(args, x):
    if x != sequential((args[0], args[1], args[2], 0)):
        raise AssertionError("not the sequential answer")


PLUGIN = iterative_plugin(
    "power",
    usage="power N BLOCKS ITERATIONS TASK_MS",
    parse=parse,
    initial=initial,
    tasks=tasks,
    task=task,
    combine=combine,
    done=done,
    check=check,
    report=lambda argv, x: sum(x) % P,
)
"""
POWER_RUN = ["power", "300", "6", "40", "60"]  # 40 iterations of 6 tasks of 60 ms
POWER_LONG = ["power", "300", "6", "70", "60"]  # 70 of them


def test_kmeans_on_local_peers_equals_a_sequential_run() -> None:
    out = run_json(*KMEANS, "--peers", "4")
    assert out["check"] == "ok"  # the check runs the same iterations without satind
    stats = out["stats"]
    # Tasks were pushed by the master's scheduler, never stolen.
    assert stats["tasks_pushed"] >= 12 and stats["barriers"] >= 1
    assert stats["stolen_local"] == 0


def _two_machines(tmp_path: Path) -> tuple[Daemon, Daemon]:
    for args in (("init", str(tmp_path)), ("issue", str(tmp_path), "m1")):
        assert satind("keys", *args).returncode == 0
    assert satind("keys", "issue", str(tmp_path), "m2").returncode == 0
    fast = tmp_path / "fast.toml"  # deaths found in about a second
    fast.write_text(FAST)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "power.py").write_text(POWER)
    opts = ["--config", str(fast), "--plugin-path", str(plugins)]
    m1 = Daemon(tmp_path, "m1", "east", "", *opts)
    m2 = Daemon(tmp_path, "m2", "west", m1.first, *opts)
    return m1, m2


def _jobs_run(keys: Path, to: str, name: str) -> int:
    return int(next(p["jobs_run"] for p in status(keys, to)["peers"] if p["slot"] == name))


def _peers(keys: Path, to: str) -> dict[str, str]:
    return {p["slot"]: p["state"] for p in status(keys, to)["peers"]}


def _iteration(keys: Path, to: str, run_id: str) -> int:
    """The iteration a run is at; a run no longer running fails the test (its tasks must be
    longer: the test acts on a running run)."""
    run = next(r for r in status(keys, to)["runs"] if r["run_id"] == run_id)
    assert run["state"] == "running", f"run {run_id} is {run['state']}: make it longer"
    return int(run["counters"].get("iteration", 0))


def _submit(keys: Path, to: str, argv: list[str]) -> tuple[str, Any]:
    """A run submitted with --wait: its id (once the master has it) and the waiting client."""
    submit = client_in_background(keys, to, "submit", *argv, "--wait", "--json")
    assert submit.stderr is not None
    line = submit.stderr.readline()  # "satind: run RUN_ID submitted"
    assert "submitted" in line, line
    return line.split()[2], submit


def test_reclaim_release_and_kills_of_a_worker_and_of_the_master(tmp_path: Path) -> None:
    m1, m2 = _two_machines(tmp_path)
    try:
        wait_for(lambda: list(_peers(tmp_path, m1.first).values()).count("alive") == 4)
        # 1. A worker reclaimed suspends (computes nothing) while the others go on; another is
        # SIGKILLed mid-iteration (its tasks are placed again); the first is released.
        run_id, submit = _submit(tmp_path, m1.first, POWER_LONG)
        try:
            wait_for(lambda: _iteration(tmp_path, m1.first, run_id) >= 2)
            proc = client(tmp_path, m1.first, "reclaim", "m2/0")
            assert proc.returncode == 0, proc.stderr
            wait_for(lambda: _peers(tmp_path, m1.first)["m2/0"] == "reclaimed")
            time.sleep(0.5)  # a task it was running when reclaimed ends (no pause point)
            ran = _jobs_run(tmp_path, m1.first, "m2/0")
            reclaimed_at = _iteration(tmp_path, m1.first, run_id)
            wait_for(lambda: _iteration(tmp_path, m1.first, run_id) >= reclaimed_at + 2)
            assert _jobs_run(tmp_path, m1.first, "m2/0") == ran  # it computed nothing
            kill_all([m2.children[1]])  # m2/1, mid-iteration
            time.sleep(1.0)
            assert _iteration(tmp_path, m1.first, run_id) > 0  # still running
            proc = client(tmp_path, m1.first, "release", "m2/0")
            assert proc.returncode == 0, proc.stderr
            wait_for(lambda: _peers(tmp_path, m1.first)["m2/0"] == "alive")
            out, err = submit.communicate(timeout=180)
        finally:
            submit.kill()
        assert submit.returncode == 0, err
        assert json.loads(out)["check"] == "ok"
        # 2. The master SIGKILLed mid-run: a survivor resumes from the last barrier.
        run_id, submit = _submit(tmp_path, m1.first, POWER_RUN)
        try:
            wait_for(lambda: _iteration(tmp_path, m1.first, run_id) >= 3)
            kill_all([m1.children[0]])  # the master, SIGKILL
            out, err = submit.communicate(timeout=180)
        finally:
            submit.kill()
        assert submit.returncode == 0, err
        assert "following run" in err
        assert json.loads(out)["check"] == "ok"
    finally:
        m1.kill()
        m2.kill()
