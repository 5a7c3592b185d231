"""What a hostile client costs a real peer: peak memory and time for each attack of issue 11,
against one `satind start` daemon (two peers) on this machine, with the default limits.

    python benchmarks/hostile.py

For each attack: the peer's peak RSS growth (VmHWM, reset before each attack), how long until
the peer closed the connection, and whether the peer still answers afterwards.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.procs import peer_pid  # noqa: E402
from satind.net import codec  # noqa: E402
from satind.net import messages as m  # noqa: E402


def _satind(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "satind", *args], capture_output=True, text=True)


class Target:
    def __init__(self, keys: Path) -> None:
        self.keys = keys
        log = keys / "daemon.log"
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "satind", "start", "--keys", str(keys)),
                *("--name", "h1", "--listen", "127.0.0.1:0", "--peers", "2"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=log.open("w"),
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = re.search(r"h1/0=([\d.]+):(\d+)", log.read_text())
            if found:
                self.host, self.port = found.group(1), int(found.group(2))
                break
            time.sleep(0.1)
        else:
            raise SystemExit(f"daemon did not start: {log.read_text()}")
        self.pid = self._peer_pid()

    def _peer_pid(self) -> int:
        return peer_pid(self.proc.pid, "h1/0")

    def rss_mb(self, field: str = "VmRSS") -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
        raise SystemExit("no " + field)

    def reset_peak(self) -> None:
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")

    def connect(self) -> ssl.SSLSocket:
        ctx = ssl.create_default_context(cafile=str(self.keys / "ca.pem"))
        ctx.check_hostname = False
        ctx.load_cert_chain(str(self.keys / "client.pem"), str(self.keys / "client.key"))
        sock = ctx.wrap_socket(socket.create_connection((self.host, self.port), timeout=30))
        hello = m.Hello(m.PROTOCOL_VERSION, "client~bench", "", "client")
        sock.sendall(codec.frame(codec.encode_message(hello)))
        return sock

    def answers(self) -> bool:
        with self.connect() as sock:
            sock.sendall(codec.frame(codec.encode_message(m.StatusRequest(9, False))))
            data = b""
            sock.settimeout(10)
            while len(data) < 200:
                chunk = sock.recv(65536)
                if not chunk:
                    return False
                data += chunk
        return True

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _until_closed(sock: ssl.SSLSocket, limit: float) -> float:
    started = time.monotonic()
    sock.settimeout(limit)
    try:
        while sock.recv(65536):
            pass
    except (ConnectionResetError, ssl.SSLError, OSError):
        pass
    return time.monotonic() - started


def tiny_items(target: Target) -> float:
    """A 16 MiB frame holding 16 million one-byte integers in one array."""
    count = 16 * 1024 * 1024 - 16
    body = b"\xa2\x61t\x18\x3c\x63req\x9a" + count.to_bytes(4, "big") + b"\x00" * count
    with target.connect() as sock:
        started = time.monotonic()
        sock.sendall(codec.FRAME_HEADER.pack(len(body)) + body)
        _until_closed(sock, 120)
        return time.monotonic() - started


def big_string(target: Target) -> float:
    """A valid 16 MiB Submit (one argument of 16 MiB): refused by the plugin lookup."""
    msg = m.Submit(1, "nosuchplugin", ["x" * (16 * 1024 * 1024)])
    with target.connect() as sock:
        started = time.monotonic()
        sock.sendall(codec.frame(codec.encode_message(msg)))
        sock.settimeout(60)
        sock.recv(65536)  # the peer's Hello, then its answer
        return time.monotonic() - started


def never_reads(target: Target) -> float:
    """Asks for status as fast as it can and never reads a reply."""
    request = codec.frame(codec.encode_message(m.StatusRequest(1, False))) * 64
    with target.connect() as sock:
        started = time.monotonic()
        sock.settimeout(60)
        try:
            while time.monotonic() - started < 120:
                sock.sendall(request)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, TimeoutError):
            pass
        return time.monotonic() - started


def half_frames(target: Target) -> float:
    """Four connections each announce a 32 MiB frame, send 31 MiB of it and stall."""
    socks = [target.connect() for _ in range(4)]
    started = time.monotonic()
    try:
        for sock in socks:
            sock.sendall(codec.FRAME_HEADER.pack(32 * 1024 * 1024) + b"\x00" * (31 * 1024 * 1024))
        for sock in socks:
            _until_closed(sock, 300)
    finally:
        for sock in socks:
            sock.close()
    return time.monotonic() - started


ATTACKS: dict[str, Callable[[Target], float]] = {
    "16 MiB frame of 16 M one-byte items": tiny_items,
    "16 MiB valid message (one huge argument)": big_string,
    "client that never reads its replies": never_reads,
    "4 x 32 MiB frames, 31 MiB sent, then silence": half_frames,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.parse_args()
    keys = Path(tempfile.mkdtemp(prefix="satind-bench-"))
    _satind("keys", "init", str(keys))
    _satind("keys", "issue", str(keys), "h1")
    target = Target(keys)
    rows = []
    try:
        time.sleep(2)
        base = target.rss_mb()
        for name, attack in ATTACKS.items():
            target.reset_peak()
            before = target.rss_mb()
            seconds = attack(target)
            peak = target.rss_mb("VmHWM")
            rows.append(
                {
                    "attack": name,
                    "peak_growth_mb": round(peak - before, 1),
                    "seconds_until_closed": round(seconds, 2),
                    "peer_answers_after": target.answers(),
                }
            )
        rows.append({"attack": "(idle peer RSS, MB)", "peak_growth_mb": round(base, 1)})
    finally:
        target.stop()
    if "--json" in sys.argv:
        print(json.dumps(rows))
        return
    print("| attack | peak RSS growth (MB) | until closed (s) | peer answers after |")
    print("|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['attack']} | {row['peak_growth_mb']} | "
            f"{row.get('seconds_until_closed', '')} | {row.get('peer_answers_after', '')} |"
        )


if __name__ == "__main__":
    main()
