"""A run's master paused (SIGSTOP) long enough to be taken for dead, then resumed (SIGCONT),
on real processes: two `satind start` daemons of two peers each, fast failure detection.
Each try submits a run to m1/0 with `submit --wait`, stops m1/0 for 10 to 25 s one second
into the run, resumes it, and checks that the submitter gets the exact answer. The
simulator's master-pause scenario is the deterministic form of this (tests/sim/test_pause.py);
this loop is the real-process check of issue 11, run outside CI.

    python benchmarks/pause_master.py [--tries 20]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.procs import peer_pid  # noqa: E402
from tests import independent  # noqa: E402

FAST = """
[membership]
probe_interval_s = 0.25
probe_timeout_s = 0.1
suspicion_mult = 3
"""
RUN = ["tree", "3", "8", "20", "sleep"]  # 512 leaves of 20 ms: about 3 s on 4 peers


def satind(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "satind", *args], capture_output=True, text=True, timeout=timeout
    )


class Daemon:
    def __init__(self, keys: Path, name: str, cluster: str, config: Path, seeds: str = "") -> None:
        cmd = [sys.executable, "-m", "satind", "start", "--keys", str(keys), "--name", name]
        cmd += ["--cluster", cluster, "--listen", "127.0.0.1:0", "--peers", "2"]
        cmd += ["--config", str(config)] + (["--seeds", seeds] if seeds else [])
        self.log = keys / f"{name}.log"
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log.open("w"))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = re.search(rf"satind {name} \(cluster \w+\): (.*)", self.log.read_text())
            if found:
                self.addresses = dict(p.split("=") for p in found.group(1).split(", "))
                return
            time.sleep(0.1)
        raise SystemExit(f"daemon {name} did not start")

    def pid_of(self, peer: str) -> int:
        return peer_pid(self.proc.pid, peer)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tries", type=int, default=20)
    args = parser.parse_args()
    keys = Path(tempfile.mkdtemp(prefix="satind-pause-"))
    satind("keys", "init", str(keys))
    for name in ("m1", "m2"):
        satind("keys", "issue", str(keys), name)
    config = keys / "fast.toml"
    config.write_text(FAST)
    m1 = Daemon(keys, "m1", "east", config)
    m2 = Daemon(keys, "m2", "west", config, m1.addresses["m1/0"])
    to = m1.addresses["m1/0"]
    pauses = [10, 15, 20, 25]
    outcomes: list[dict[str, object]] = []
    try:
        time.sleep(3)
        for i in range(args.tries):
            pause = pauses[i % len(pauses)]
            master = m1.pid_of("m1/0")
            submit = subprocess.Popen(
                [
                    *(sys.executable, "-m", "satind", "submit", *RUN, "--wait", "--json"),
                    *("--to", to, "--keys", str(keys), "--config", str(config)),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            time.sleep(1.0)
            os.kill(master, signal.SIGSTOP)
            time.sleep(pause)
            os.kill(master, signal.SIGCONT)
            started = time.monotonic()
            try:
                out, err = submit.communicate(timeout=120)
                ok = submit.returncode == 0 and json.loads(out)["result"] == independent.tree(3, 8)
                why = "" if ok else (err.strip().splitlines() or ["?"])[-1]
            except subprocess.TimeoutExpired:
                submit.kill()
                ok, why = False, "no answer within 120 s after SIGCONT"
            outcomes.append(
                {
                    "try": i + 1,
                    "pause_s": pause,
                    "exact": ok,
                    "answer_after_sigcont_s": round(time.monotonic() - started, 1),
                    "why": why,
                }
            )
            print(json.dumps(outcomes[-1]), flush=True)
            time.sleep(3)  # let membership settle (the old master refutes its death)
    finally:
        m1.stop()
        m2.stop()
    exact = sum(1 for o in outcomes if o["exact"])
    print(f"{exact} of {len(outcomes)} tries exact")


if __name__ == "__main__":
    main()
