"""Make the console screenshot in the docs from a real system: two daemons of two peers each
on this machine (clusters east and west), two runs in progress, rendered by the same code as
`satind status --watch` (its peers table and run bars) into an SVG.

    python docs/screenshots.py          # writes docs/console.svg (about 20 s)

Every process it starts is stopped by it (by pid).
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio
from rich.console import Console, Group
from rich.text import Text

from satind.cli.console import peers_table, run_bars
from satind.client.client import connect
from satind.config import DEFAULT
from satind.net import tls
from satind.net.framing import parse_address

HERE = Path(__file__).parent
RUNS = (["tree", "3", "8", "100", "sleep"], ["nqueens", "15"])


def satind(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "satind", *args], capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        raise SystemExit(f"satind {' '.join(args)}: {done.stderr}")
    return done.stdout


def start(keys: Path, name: str, cluster: str, seeds: str) -> tuple[subprocess.Popen[bytes], str]:
    log = keys / f"{name}.log"
    cmd = [sys.executable, "-m", "satind", "start", "--keys", str(keys), "--name", name]
    cmd += ["--cluster", cluster, "--listen", "127.0.0.1:0", "--peers", "2"]
    if seeds:
        cmd += ["--seeds", seeds]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log.open("w"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(rf"satind {name} \(cluster \w+\): \S+=(\S+?)[,\n]", log.read_text())
        if found:
            return proc, found.group(1)
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"daemon {name} did not start: {log.read_text()}")


async def render(keys: Path, address: str, out: Path) -> None:
    credentials = tls.Credentials.load(keys, "client", tls.ROLE_CLIENT)
    async with connect(parse_address(address), DEFAULT, credentials) as client:
        first = await client.status()
        await trio.sleep(2.0)
        reply = await client.status()
    console = Console(record=True, width=132, file=io.StringIO(), force_terminal=True)
    bars = run_bars(console)
    before = {r.run_id: r for r in first.runs}
    for run in reply.runs:
        if run.state != "running":
            continue
        jobs = run.counters.get("jobs_run", 0) - before[run.run_id].counters.get("jobs_run", 0)
        rate = f"{jobs / 2.0:,.0f} jobs/s"
        task = bars.add_task(
            f"{run.run_id} {run.plugin} {' '.join(run.argv)}", total=1.0, rate=rate
        )
        bars.update(task, completed=run.progress)
    up = sum(1 for p in reply.peers if p.state in ("alive", "draining"))
    console.print(Group(peers_table(reply), bars.get_renderable(), Text(f"{up} peers up")))
    console.save_svg(str(out), title="satind status --watch")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        keys = Path(tmp)
        satind("keys", "init", str(keys))
        for name in ("m1", "m2"):
            satind("keys", "issue", str(keys), name)
        daemons = []
        try:
            m1, first = start(keys, "m1", "east", "")
            daemons.append(m1)
            m2, second = start(keys, "m2", "west", first)
            daemons.append(m2)
            time.sleep(3)
            for argv, to in zip(RUNS, (first, second), strict=True):  # a master on each
                satind("submit", *argv, "--to", to, "--keys", str(keys))
            time.sleep(4)
            trio.run(render, keys, first, HERE / "console.svg")
            print(f"wrote {HERE / 'console.svg'}")
        finally:
            for proc in daemons:
                proc.terminate()
            for proc in daemons:
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


if __name__ == "__main__":
    main()
