"""The run history outlives the daemons (node/history.py), with the shipped defaults: after
one machine is SIGKILLed and the other restarted, `satind runs` lists the runs, and `result`
and `logs` answer for them, from the records the survivors kept."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.integration.test_daemon import Daemon, client, status, wait_for

pytestmark = pytest.mark.slow
PLUGINS = str(Path(__file__).parent.parent / "data" / "plugins")


def _runs(keys: Path, to: str, *args: str) -> list[dict[str, object]]:
    proc = client(keys, to, "runs", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    out: list[dict[str, object]] = json.loads(proc.stdout)
    return out


def test_runs_result_and_logs_answer_after_a_machine_is_lost_and_the_other_restarted(
    keys: Path,
) -> None:
    m1 = Daemon(keys, "m1", "east", "", "--plugin-path", PLUGINS)
    m2: Daemon | None = None
    try:
        m2 = Daemon(keys, "m2", "west", m1.first, "--plugin-path", PLUGINS)
        wait_for(lambda: len(status(keys, m1.first)["peers"]) == 4)
        # Runs mastered on m1 (submitted there): one that prints, one that fails.
        proc = client(keys, m1.first, "submit", "chatty", "6", "--wait", "--json")
        assert proc.returncode == 0, proc.stderr
        run_id = json.loads(proc.stdout)["run_id"]
        proc = client(keys, m1.first, "submit", "explode", "2", "0")
        assert proc.returncode == 0, proc.stderr
        failed = proc.stdout.strip()

        # The master records it (history.record_delay_s after its end) and sends its lines
        # to the copies' holders, members of the other machine first.
        west = m2.first

        def recorded_by_master() -> bool:
            runs = _runs(keys, west)
            return len(runs) == 2 and all(r["recorded_by"] == "m1/0" for r in runs)

        wait_for(recorded_by_master)
        time.sleep(1.0)  # the master sent its lines to the holders as it recorded: let them land

        m1.kill()  # the master's machine, its history file with it (as far as m2 knows)
        m2.proc.send_signal(signal.SIGTERM)
        assert m2.proc.wait(timeout=60) == 0
        m2 = Daemon(keys, "m2", "west", "", "--plugin-path", PLUGINS)

        listed = _runs(keys, m2.first, "--state", "done", "--since", "1h")
        [mine] = [r for r in listed if r["run_id"] == run_id]
        assert mine["plugin"] == "chatty" and mine["argv"] == ["6"]
        assert mine["masters"] == ["m1/0@0"] and mine["owner"] == "client"
        assert mine["stats"]["jobs_run"] == 25  # type: ignore[index]
        proc = client(keys, m2.first, "result", run_id, "--json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["result"] == 13
        proc = client(keys, m2.first, "logs", run_id)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert len([line for line in lines if line.endswith("says hello")]) == 13, lines
        [bad] = _runs(keys, m2.first, "--state", "failed")
        assert bad["run_id"] == failed and "boom in a leaf" in str(bad["error"])
        assert {r["run_id"] for r in _runs(keys, m2.first)} >= {run_id, failed}
        # A run no one recorded is said to be unknown, not an error of the history.
        proc = client(keys, m2.first, "logs", "20200101-000000-000000")
        assert proc.returncode != 0 and "no run" in proc.stderr
    finally:
        m1.kill()
        if m2 is not None:
            m2.kill()


def test_a_corrupt_history_file_is_refused_clearly_and_the_peers_still_run(
    keys: Path, tmp_path: Path
) -> None:
    path = tmp_path / "history.sqlite"
    path.write_bytes(os.urandom(4096))
    m1 = Daemon(keys, "m1", "east", "", "--history", str(path))
    try:
        wait_for(lambda: "keeps no run history" in m1.log.read_text())
        assert "cannot be used as a run history" in m1.log.read_text()
        proc = client(keys, m1.first, "submit", "fib", "20", "--wait", "--json")
        assert proc.returncode == 0 and json.loads(proc.stdout)["result"] == 6765
        proc = client(keys, m1.first, "runs")
        assert proc.returncode != 0 and "no run history" in proc.stderr
    finally:
        m1.kill()
