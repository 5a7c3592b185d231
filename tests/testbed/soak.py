"""The testbed soak's short form (issue 45, point 5), run by tests/testbed/test_partitions.py:
`benchmarks/soak.py --testbed` in a process of its own, its testbed removed however it ends.
The 30-minute soak's numbers are in docs/benchmarks.md."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from satind.testbed import Testbed

ROOT = Path(__file__).resolve().parent.parent.parent
SOAK = ROOT / "benchmarks" / "soak.py"
# seconds. Submissions for 2 minutes, then the runs in flight (the longest about 40 s under
# faults), the check for one system and the teardown; the rest is margin for a loaded suite.
LIMIT_S = 360.0
# seconds. How long an interrupted soak may take to remove its testbed.
TEARDOWN_S = 120.0


def run_soak(workdir: Path, *args: str) -> dict[str, Any]:
    """Run the soak in ``workdir`` and return its JSON report; the testbed is removed also
    when the soak had to be stopped."""
    out = workdir / "report.json"
    cmd = [sys.executable, str(SOAK), "--testbed", "--dir", str(workdir), "--out", str(out)]
    proc = subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        output, _ = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # the soak stops what it started, then reports
        try:
            output, _ = proc.communicate(timeout=TEARDOWN_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
        raise AssertionError(
            f"the soak took over {LIMIT_S:g} s:\n{output.decode()[-6000:]}"
        ) from None
    finally:
        if (workdir / "testbed.json").exists():  # not removed: the soak died before its end
            Testbed.load(workdir).down()
    text = output.decode(errors="replace")
    assert out.exists(), f"no report (exit {proc.returncode}):\n{text[-6000:]}"
    report: dict[str, Any] = json.loads(out.read_text())
    report["output"] = text
    return report
