"""Make the screenshots in the docs from a real system.

- docs/console.svg: two daemons of two peers each on this machine (clusters east and west),
  two runs in progress, rendered by the same code as `satind status --watch` (its peers table
  and run bars).
- docs/trace.svg: the trace file of `satind run tree 3 7 5 sleep --peers 3 --trace FILE`
  drawn as its tracks (a row per peer and thread, a box per span), the way ui.perfetto.dev
  lays it out (no browser here: this draws the same file).

    python docs/screenshots.py          # about 30 s

Every process it starts is stopped by it (by pid).
"""

from __future__ import annotations

import html
import io
import json
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


def trace_svg(trace: Path, out: Path, width: int = 1100) -> None:
    """Draw a Chrome trace-event file: a row per (peer, thread), a box per complete event."""
    events = json.loads(trace.read_text())["traceEvents"]
    peers = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"
    }
    spans = [e for e in events if e["ph"] in ("X", "i")]
    rows = sorted({(e["pid"], e["tid"]) for e in spans})
    end = max(e["ts"] + e.get("dur", 0) for e in spans) or 1.0
    left, row_h = 230, 22
    scale = (width - left - 10) / end
    colors = {"job": "#4e79a7", "steal": "#59a14f", "sync": "#f28e2b", "recovery": "#e15759"}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{row_h * len(rows) + 40}" font-family="monospace" font-size="12">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="{left}" y="14">0 ms</text>'
        f'<text x="{width - 90}" y="14">{end / 1000:,.0f} ms</text>',
    ]
    for i, (pid, tid) in enumerate(rows):
        y = 24 + i * row_h
        label = f"{peers.get(pid, pid)} {threads.get((pid, tid), tid)}"
        parts.append(f'<text x="4" y="{y + 14}">{html.escape(label)}</text>')
        parts.append(
            f'<line x1="{left}" x2="{width - 10}" y1="{y + 19}" y2="{y + 19}" stroke="#ddd"/>'
        )
        for e in (e for e in spans if (e["pid"], e["tid"]) == (pid, tid)):
            x = left + e["ts"] * scale
            w = max(2.0, e.get("dur", 0) * scale)
            color = colors.get(e.get("cat", ""), "#999")
            title = html.escape(f"{e['name']} ({e.get('dur', 0) / 1000:.1f} ms)")
            parts.append(
                f'<rect x="{x:.1f}" y="{y + 2}" width="{w:.1f}" height="{row_h - 6}" '
                f'fill="{color}"><title>{title}</title></rect>'
            )
    parts.append("</svg>")
    out.write_text("\n".join(parts))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.json"
        satind("run", "tree", "3", "7", "5", "sleep", "--peers", "3", "--trace", str(trace))
        trace_svg(trace, HERE / "trace.svg")
        print(f"wrote {HERE / 'trace.svg'}")
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
