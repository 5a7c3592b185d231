"""Total loss: every peer of a run is SIGKILLed mid-run; `satind resume` on other, fewer
peers finishes it exactly from the checkpoint logs, computing less than a fresh run."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests import independent
from tests.integration.procs import alive
from tests.integration.test_daemon import (
    Daemon,
    client,
    client_in_background,
    satind,
    status,
    wait_for,
)

pytestmark = pytest.mark.slow


def _wait_checkpointed(keys: Path, daemon: Daemon, run_id: str) -> None:
    """Both of ``daemon``'s peers up, and the run listed "checkpointed": they found it
    unfinished in the checkpoint directory (late under a full suite on two busy cores)."""
    wait_for(lambda: sum(p["state"] == "alive" for p in status(keys, daemon.first)["peers"]) == 2)
    wait_for(
        lambda: (
            {r["run_id"]: r["state"] for r in status(keys, daemon.first)["runs"]}.get(run_id)
            == "checkpointed"
        ),
        30,
    )


# Every policy on real processes (tests/sim/test_checkpoint_sim.py runs each on 8 seeds too).
@pytest.mark.parametrize("policy", ["orphans", "tic", "sel"])
def test_a_run_survives_the_loss_of_every_peer(keys: Path, tmp_path: Path, policy: str) -> None:
    assert satind("keys", "issue", str(keys), "m3").returncode == 0
    ckpt = tmp_path / "checkpoints"
    config = tmp_path / "policy.toml"
    config.write_text(f'[checkpoint]\npolicy = "{policy}"\n')
    opts = ["--checkpoint-dir", str(ckpt), "--checkpoint-interval", "0.3", "--config", str(config)]
    m1 = Daemon(keys, "m1", "east", "", "--peers", "3", *opts)
    try:
        wait_for(lambda: sum(p["state"] == "alive" for p in status(keys, m1.first)["peers"]) == 3)
        # 512 leaves of 30 ms: about 5 s on 3 peers.
        proc = client(keys, m1.first, "submit", "tree", "3", "8", "30", "sleep")
        run_id = proc.stdout.strip()
        assert proc.returncode == 0, proc.stderr
        wait_for(lambda: any(r["progress"] > 0.5 for r in status(keys, m1.first)["runs"]), 60)
        time.sleep(0.5)  # a checkpoint interval or so
    finally:
        m1.kill()  # every peer, SIGKILL: nothing is left of the run but the logs
    wait_for(lambda: not any(alive(p) for p in m1.children), 10)
    logs = sorted(p.name for p in ckpt.iterdir())
    assert logs and all(name.endswith(".satlog") for name in logs)

    # Other peers (a different machine and cluster, 2 peers instead of 3) resume it.
    m3 = Daemon(keys, "m3", "west", "", "--peers", "2", *opts)
    try:
        # The peers found the unfinished run in the checkpoint directory: status lists it.
        _wait_checkpointed(keys, m3, run_id)
        proc = client(keys, m3.first, "resume", run_id, "--wait", "--json", timeout=120)
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert report["run_id"] == run_id
        assert report["result"] == independent.tree(3, 8) and report["check"] == "ok"
        stats = report["stats"]
        assert stats["results_reused"] > 0  # checkpointed results were used...
        assert stats["leaves_run"] < 512  # ...so less was computed than by a fresh run
        if policy != "orphans":
            # Every finished job was logged ("sel"), or every open frame's finished children
            # at each interval ("tic"): the master's own work too. More than half of the
            # leaves were done at the kill, and few of them are computed again (the
            # "orphans" policy logs only what crossed a steal: about 370-385 leaves here).
            assert stats["leaves_run"] < 320
        # `status` shows each peer's checkpoints: policy, bytes written, age.
        peers = [p for p in status(keys, m3.first)["peers"] if p["state"] == "alive"]
        assert {p["checkpoint_policy"] for p in peers} == {policy}
        assert sum(p["checkpoint_bytes"] for p in peers) > 0
        # Now it is done, and listed so (not as checkpointed any more).
        runs = {r["run_id"]: r["state"] for r in status(keys, m3.first)["runs"]}
        assert runs[run_id] == "done"
        # A run that is not in the logs is refused with a clear message.
        proc = client(keys, m3.first, "resume", "20260101-000000-abcdef")
        assert proc.returncode != 0 and "no checkpoint of run" in proc.stderr
    finally:
        m3.kill()


def test_suspend_then_resume_on_the_same_peers(keys: Path, tmp_path: Path) -> None:
    opts = ["--checkpoint-dir", str(tmp_path / "ckpt"), "--checkpoint-interval", "5"]
    m1 = Daemon(keys, "m1", "east", "", "--peers", "3", *opts)
    try:
        wait_for(lambda: sum(p["state"] == "alive" for p in status(keys, m1.first)["peers"]) == 3)
        argv = ["submit", "tree", "3", "8", "60", "sleep", "--wait", "--json"]
        submit = client_in_background(keys, m1.first, *argv)
        try:
            wait_for(lambda: any(r["progress"] > 0.4 for r in status(keys, m1.first)["runs"]), 60)
            run_id = next(r["run_id"] for r in status(keys, m1.first)["runs"])
            # Suspend through a peer that is not the master: the request is relayed.
            other = list(m1.addresses.values())[1]
            proc = client(keys, other, "suspend", run_id)
            assert proc.returncode == 0 and "suspended" in proc.stdout, proc.stderr
            _, err = submit.communicate(timeout=60)
        finally:
            submit.kill()
        assert submit.returncode != 0 and "suspended" in err  # the submitter is told
        # A run that is not running cannot be suspended.
        proc = client(keys, m1.first, "suspend", run_id)
        assert proc.returncode == 1 and "masters no running run" in proc.stderr
        # Later: resume it, on the same peers. The checkpoint interval is 5 s: what the peers
        # finished went to the logs at the suspend, not at an interval.
        proc = client(keys, m1.first, "resume", run_id, "--wait", "--json", timeout=120)
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert report["result"] == independent.tree(3, 8) and report["check"] == "ok"
        assert report["stats"]["results_reused"] > 0
        assert report["stats"]["leaves_run"] < 512
    finally:
        m1.kill()


# An iterative run (its barrier every iteration) and an SPMD run (every spmd.checkpoint_every
# = 20 iterations), long enough on 2 peers to be killed after a few barriers.
BARRIER_RUNS = {
    "kmeans": (["kmeans", "200000", "6", "12", "3", "40"], 3),
    "heat2d": (["heat2d", "240", "240", "400", "8"], 45),
}


@pytest.mark.parametrize("app", sorted(BARRIER_RUNS))
def test_an_iterative_or_spmd_run_resumes_from_its_last_barrier_after_a_total_loss(
    keys: Path, tmp_path: Path, app: str
) -> None:
    # Issue 34, point 3: the barrier state is in the checkpoint logs, not only in memory.
    assert satind("keys", "issue", str(keys), "m3").returncode == 0
    argv, past = BARRIER_RUNS[app]
    ckpt = tmp_path / "checkpoints"
    opts = ["--checkpoint-dir", str(ckpt), "--checkpoint-interval", "0.3"]
    m1 = Daemon(keys, "m1", "east", "", "--peers", "2", *opts)
    try:
        wait_for(lambda: sum(p["state"] == "alive" for p in status(keys, m1.first)["peers"]) == 2)
        proc = client(keys, m1.first, "submit", *argv)
        assert proc.returncode == 0, proc.stderr
        run_id = proc.stdout.strip()

        def iteration() -> int:
            run = next(r for r in status(keys, m1.first)["runs"] if r["run_id"] == run_id)
            assert run["state"] == "running", f"{app} ended before the kill: make it longer"
            return int(run["counters"].get("iteration", 0))

        wait_for(lambda: iteration() >= past, 90)
        time.sleep(0.6)  # two checkpoint intervals: the barrier is on the disk
    finally:
        m1.kill()  # every peer, SIGKILL: the barriers in memory are gone with them
    wait_for(lambda: not any(alive(p) for p in m1.children), 10)

    m3 = Daemon(keys, "m3", "west", "", "--peers", "2", *opts)
    try:
        _wait_checkpointed(keys, m3, run_id)
        proc = client(keys, m3.first, "resume", run_id, "--wait", "--json", timeout=180)
        assert proc.returncode == 0, proc.stderr
        report = json.loads(proc.stdout)
        assert report["check"] == "ok", report
        # It went on from a barrier past the first iterations, not from the start.
        found = re.search(rf"run {run_id}: from its barrier at iteration (\d+)", m3.log.read_text())
        assert found is not None, m3.log.read_text()[-3000:]
        assert int(found.group(1)) >= (1 if app == "kmeans" else 20)
    finally:
        m3.kill()
