"""How fast a busy peer's network side answers: the round trip of a status request to a run's
master while it parses, encodes and hands out large arguments (`heavy ROWS`, the test plugin
whose every job carries a slice of a big table) — what a SWIM probe waits for.

    python benchmarks/probe_latency.py [--rows 200000] [--repeat 3] [--against DIR]

It starts `satind start` (two peers) from this checkout, submits the run to peer 0 with
`submit --wait`, and meanwhile sends peer 0 a status request every 20 ms over mutual TLS,
recording each round trip. With ``--against DIR`` (a checkout of another version, e.g. a git
worktree of an older main) it does the same with that version, interleaved, so that both are
measured on the same machine at the same time of day.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ROOT / "tests" / "data" / "plugins"


def _run(cwd: Path, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [sys.executable, "-m", "satind", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        **kw,  # type: ignore[arg-type]
    )


def _frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def _cbor_status_request(req: int) -> bytes:
    import cbor2

    return cbor2.dumps({"t": 60, "req": req, "deep": False})


def _hello(version: int) -> bytes:
    import cbor2

    return cbor2.dumps(
        {"t": 1, "version": version, "sender": "client~bench", "cluster": "", "role": "client"}
    )


def _read_frame(sock: ssl.SSLSocket, buffer: bytearray) -> bytes:
    while len(buffer) < 4 or len(buffer) < 4 + int.from_bytes(buffer[:4], "big"):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        buffer += chunk
    n = int.from_bytes(buffer[:4], "big")
    body = bytes(buffer[4 : 4 + n])
    del buffer[: 4 + n]
    return body


def measure(checkout: Path, rows: int) -> list[float]:
    keys = Path(tempfile.mkdtemp(prefix="satind-probe-"))
    _run(checkout, "keys", "init", str(keys))
    _run(checkout, "keys", "issue", str(keys), "b1")
    version = int(
        subprocess.run(
            [
                sys.executable,
                "-c",
                "from satind.net.messages import PROTOCOL_VERSION as v; print(v)",
            ],
            cwd=checkout,
            env={**os.environ, "PYTHONPATH": str(checkout)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    log = keys / "daemon.log"
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    daemon = subprocess.Popen(
        [
            *(sys.executable, "-m", "satind", "start", "--keys", str(keys), "--name", "b1"),
            *("--listen", "127.0.0.1:0", "--peers", "2", "--plugin-path", str(PLUGINS)),
        ],
        cwd=checkout,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
    )
    rtts: list[float] = []
    try:
        deadline = time.monotonic() + 30
        while not (found := re.search(r"b1/0=([\d.]+):(\d+)", log.read_text())):
            if time.monotonic() > deadline:
                raise SystemExit(f"daemon did not start: {log.read_text()}")
            time.sleep(0.1)
        host, port = found.group(1), int(found.group(2))
        time.sleep(2)
        ctx = ssl.create_default_context(cafile=str(keys / "ca.pem"))
        ctx.check_hostname = False
        ctx.load_cert_chain(str(keys / "client.pem"), str(keys / "client.key"))
        sock = ctx.wrap_socket(socket.create_connection((host, port), timeout=60))
        sock.sendall(_frame(_hello(version)))
        buffer = bytearray()
        _read_frame(sock, buffer)  # the peer's Hello
        submit = subprocess.Popen(
            [
                *(sys.executable, "-m", "satind", "submit", "heavy", str(rows), "--wait"),
                *("--to", f"{host}:{port}", "--keys", str(keys), "--plugin-path", str(PLUGINS)),
            ],
            cwd=checkout,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        req = 0
        while submit.poll() is None:
            req += 1
            sent = time.perf_counter()
            sock.sendall(_frame(_cbor_status_request(req)))
            _read_frame(sock, buffer)
            rtts.append(time.perf_counter() - sent)
            time.sleep(0.02)
        sock.close()
    finally:
        daemon.terminate()
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            daemon.kill()
    return rtts


def summary(rtts: list[float]) -> dict[str, float]:
    ordered = sorted(rtts)
    return {
        "samples": len(ordered),
        "median_ms": round(1000 * statistics.median(ordered), 2),
        "p99_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 1),
        "max_ms": round(1000 * ordered[-1], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", type=Path, help="another checkout, measured interleaved")
    args = parser.parse_args()
    checkouts = {"this": ROOT}
    if args.against:
        checkouts["against"] = args.against.resolve()
    results: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    for _ in range(args.repeat):
        for name, checkout in checkouts.items():
            results[name].append(summary(measure(checkout, args.rows)))
            print(name, json.dumps(results[name][-1]), flush=True)
    for name, runs in results.items():
        print(
            f"{name}: median of medians {statistics.median(r['median_ms'] for r in runs)} ms, "
            f"median p99 {statistics.median(r['p99_ms'] for r in runs)} ms, "
            f"median max {statistics.median(r['max_ms'] for r in runs)} ms"
        )


if __name__ == "__main__":
    main()
