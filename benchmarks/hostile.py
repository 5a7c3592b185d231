"""What a hostile client costs a real peer, against one `satind start` daemon (two peers,
h1/0 and h1/1) on this machine with the shipped limits.

    python benchmarks/hostile.py                  # every attack
    python benchmarks/hostile.py --only stalled   # some of them

The attacks come from the client certificate "attacker" and run one after another against
h1/0. While each runs, a monitor with its own client certificate asks h1/0 for its status
and h1/1 whether h1/0 is alive, once a second, and one run mastered by h1/0 (a sleeping
`tree`) must end with the right answer: what the members and the other clients see.

Each attack gets a daemon of its own. For each: the peer's peak RSS growth (VmHWM, reset
before), its RSS once the attack's connections are gone against its RSS before, how long
until the peer closed the attacking connection, and what the monitor saw. Churn reports the
RSS each closed connection leaves behind.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.procs import peer_pid  # noqa: E402
from satind.net import codec  # noqa: E402
from satind.net import messages as m  # noqa: E402
from tests import independent  # noqa: E402
from tests.security.live import read_frames  # noqa: E402

MiB = 1024 * 1024
CLOSED = (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError)


def _satind(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "satind", *args], capture_output=True, text=True)


class Target:
    """The daemon, its peers' addresses, and TLS connections to them as some client."""

    def __init__(self, keys: Path, config: Path | None) -> None:
        self.keys = keys
        self.log = keys / "daemon.log"
        extra = ["--config", str(config)] if config else []
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "satind", "start", "--keys", str(keys)),
                *("--name", "h1", "--listen", "127.0.0.1:0", "--peers", "2", *extra),
            ],
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("w"),
        )
        self.addresses: dict[str, tuple[str, int]] = {}
        deadline = time.monotonic() + 60
        while len(self.addresses) < 2 and time.monotonic() < deadline:
            for name, host, port in re.findall(r"(h1/\d)=([\d.]+):(\d+)", self.log.read_text()):
                self.addresses[name] = (host, int(port))
            time.sleep(0.1)
        if len(self.addresses) < 2:
            self.stop()
            raise SystemExit(f"daemon did not start: {self.log.read_text()}")
        self.pid = peer_pid(self.proc.pid, "h1/0")
        self._contexts: dict[str, ssl.SSLContext] = {}

    def rss_mb(self, field: str = "VmRSS") -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
        raise SystemExit("no " + field)

    def reset_peak(self) -> None:
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")

    def context(self, client: str) -> ssl.SSLContext:
        if client not in self._contexts:
            ctx = ssl.create_default_context(cafile=str(self.keys / "ca.pem"))
            ctx.check_hostname = False
            ctx.load_cert_chain(str(self.keys / f"{client}.pem"), str(self.keys / f"{client}.key"))
            self._contexts[client] = ctx
        return self._contexts[client]

    def connect(
        self, client: str = "attacker", peer: str = "h1/0", hello: bool = True
    ) -> ssl.SSLSocket:
        raw = socket.create_connection(self.addresses[peer], timeout=30)
        sock = self.context(client).wrap_socket(raw)
        if hello:
            msg = m.Hello(m.PROTOCOL_VERSION, f"{client}~{os.getpid():x}", "", "client")
            sock.sendall(codec.frame(codec.encode_message(msg)))
        return sock

    def status(self, peer: str, client: str = "monitor") -> m.StatusReply | None:
        """``peer``'s own status (its view of the members), or None within 5 s."""
        try:
            with self.connect(client, peer) as sock:
                sock.sendall(codec.frame(codec.encode_message(m.StatusRequest(9, False))))
                replies = read_frames(sock, 2, timeout=5)
        except CLOSED:
            return None
        reply = replies[-1] if replies else None
        return reply if isinstance(reply, m.StatusReply) else None

    def submit(self, *argv: str) -> subprocess.Popen[str]:
        host, port = self.addresses["h1/0"]
        return subprocess.Popen(
            [
                *(sys.executable, "-m", "satind", "submit", *argv, "--wait", "--json"),
                *("--to", f"{host}:{port}", "--keys", str(self.keys), "--as", "monitor"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def closed_members(self) -> int:
        """Connections from a member that h1/0 closed over a budget (its log)."""
        return len(re.findall(r"closing connection from h1/1: frame of", self.log.read_text()))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Watch:
    """What the members and another client saw while an attack ran: one (status to h1/0
    answered within 5 s, h1/1 sees h1/0 alive) per check."""

    checks: list[tuple[bool, bool]] = field(default_factory=list)
    run_ok: bool | None = None
    notes: list[str] = field(default_factory=list)

    def problems(self, since: int = 0) -> int:
        return sum((not answered) + (not alive) for answered, alive in self.checks[since:])

    def line(self) -> str:
        asked = len(self.checks)
        answered = sum(a for a, _ in self.checks)
        alive = sum(b for _, b in self.checks)
        run = {None: "-", True: "exact", False: "FAILED"}[self.run_ok]
        return f"{answered}/{asked} answered, {alive}/{asked} alive, run {run}"


@contextmanager
def watched(target: Target, run: bool = True) -> Iterator[Watch]:
    """Watch h1/0 once a second while the block runs, and a run it masters."""
    watch = Watch()
    done = threading.Event()

    def loop() -> None:
        while not done.is_set():
            started = time.monotonic()
            answered = target.status("h1/0") is not None
            seen = target.status("h1/1")
            states = {p.name: p.state for p in seen.peers} if seen else {}
            watch.checks.append((answered, states.get("h1/0") == "alive"))
            done.wait(max(0.0, 1.0 - (time.monotonic() - started)))

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    proc = target.submit("tree", "3", "4", "100", "sleep") if run else None
    try:
        yield watch
    finally:
        done.set()
        thread.join()
        if proc is not None:
            out, err = proc.communicate(timeout=300)
            result = json.loads(out).get("result") if proc.returncode == 0 else None
            watch.run_ok = result == independent.tree(3, 4)
            if not watch.run_ok:
                watch.notes.append(f"rc {proc.returncode}: {err.strip()[-200:]}")


def _until_closed(sock: ssl.SSLSocket, limit: float) -> float:
    started = time.monotonic()
    sock.settimeout(limit)
    try:
        while sock.recv(65536):
            pass
    except (TimeoutError, *CLOSED):
        pass
    return time.monotonic() - started


Result = dict[str, Any]


def tiny_items(target: Target, args: argparse.Namespace) -> Result:
    """A 16 MiB frame holding 16 million one-byte integers in one array."""
    count = 16 * MiB - 16
    body = b"\xa2\x61t\x18\x3c\x63req\x9a" + count.to_bytes(4, "big") + b"\x00" * count
    with target.connect() as sock:
        started = time.monotonic()
        sock.sendall(codec.FRAME_HEADER.pack(len(body)) + body)
        _until_closed(sock, 120)
        return {"closed_after_s": time.monotonic() - started}


def big_string(target: Target, args: argparse.Namespace) -> Result:
    """A valid 16 MiB Submit (one argument of 16 MiB): refused by the plugin lookup."""
    msg = m.Submit(1, "nosuchplugin", ["x" * (16 * MiB)])
    with target.connect() as sock:
        started = time.monotonic()
        sock.sendall(codec.frame(codec.encode_message(msg)))
        read_frames(sock, 2, timeout=60)  # the peer's Hello, then its answer
        return {"answered_after_s": time.monotonic() - started}


def stalled_headers(target: Target, args: argparse.Namespace) -> Result:
    """Four connections each send one header declaring 64 MiB and nothing more, held for
    ``--hold`` seconds (issue 28: on the old budget this took h1/0 off the network)."""
    members_closed = target.closed_members()
    socks = [target.connect() for _ in range(4)]
    with watched(target) as watch:
        for sock in socks:
            sock.sendall(codec.FRAME_HEADER.pack(64 * MiB))
        time.sleep(args.hold)
    open_still = 0
    for sock in socks:
        sock.settimeout(0.01)
        try:
            open_still += sock.recv(65536) != b""  # the peer's Hello came long ago
        except TimeoutError:
            open_still += 1
        except CLOSED:
            pass
        sock.close()
    return {
        "watch": watch,
        "members_refused": target.closed_members() - members_closed,
        "open_after_hold": open_still,
    }


def half_frames(target: Target, args: argparse.Namespace) -> Result:
    """Four connections each announce a 32 MiB frame, send 31 MiB of it and stall."""
    socks = [target.connect() for _ in range(4)]
    started = time.monotonic()
    with watched(target) as watch:
        for sock in socks:
            # Over the client's budget: closed at once.
            with contextlib.suppress(*CLOSED):
                sock.sendall(codec.FRAME_HEADER.pack(32 * MiB) + b"\x00" * (31 * MiB))
        for sock in socks:
            _until_closed(sock, 300)
    for sock in socks:
        sock.close()
    return {"watch": watch, "closed_after_s": time.monotonic() - started}


def never_reads(target: Target, args: argparse.Namespace) -> Result:
    """Asks for status as fast as it can and never reads a reply."""
    request = codec.frame(codec.encode_message(m.StatusRequest(1, False))) * 64
    sent = 0
    with watched(target, run=False) as watch, target.connect() as sock:
        started = time.monotonic()
        sock.settimeout(60)
        try:
            while time.monotonic() - started < 120:
                sock.sendall(request)
                sent += len(request)
        except (TimeoutError, *CLOSED):
            pass
        closed = time.monotonic() - started
    return {"watch": watch, "closed_after_s": closed, "requests_mb": sent / MiB}


def _open_idle(
    target: Target, kind: str, count: int, socks: list[socket.socket], failed: list[str]
) -> None:
    for _ in range(count):
        try:
            if kind == "tcp":
                sock = socket.create_connection(target.addresses["h1/0"], 10)
            else:
                sock = target.connect("monitor", hello=kind == "hello")
            socks.append(sock)
        except (TimeoutError, *CLOSED) as exc:
            failed.append(type(exc).__name__)


def idle_connections(target: Target, args: argparse.Namespace) -> Result:
    """Three phases of ``--idle`` connections each, opened at once from 16 threads, that do
    nothing, held for 8 s each: TCP that never starts TLS, TLS that never says Hello, and
    TLS with a Hello, then silence. They hold the monitor's own certificate (a careless
    script of the same user, or the one client certificate `satind keys init` makes, shared):
    its connections must still get through."""
    phases = []
    with watched(target) as watch:
        for kind in ("tcp", "tls", "hello"):
            since = len(watch.checks)
            socks: list[socket.socket] = []
            failed: list[str] = []
            threads = [
                threading.Thread(
                    target=_open_idle, args=(target, kind, args.idle // 16, socks, failed)
                )
                for _ in range(16)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            refused = len(failed)
            time.sleep(8)
            kept = 0
            for sock in socks:
                sock.settimeout(0.01)
                try:
                    while sock.recv(65536):  # the peer's Hello, or its Bye when refused
                        pass
                except TimeoutError:
                    kept += 1  # still open: no end of stream
                except CLOSED:
                    pass
                sock.close()
            time.sleep(2)
            asked = len(watch.checks) - since
            problems = watch.problems(since)
            phases.append(
                f"{kind}: {problems} problems in {asked} checks, {kept} of {args.idle} "
                f"kept open after 8 s, {refused} failed to connect"
            )
    return {"watch": watch, "phases": "; ".join(phases)}


def churn(target: Target, args: argparse.Namespace) -> Result:
    """Connect, ask for status, read the answer, close: ``--churn`` times, twice."""
    rounds = []
    for _ in range(2):
        before = target.rss_mb()
        for _ in range(args.churn):
            with target.connect() as sock:
                sock.sendall(codec.frame(codec.encode_message(m.StatusRequest(3, False))))
                read_frames(sock, 2, timeout=10)
        time.sleep(2)
        rounds.append(target.rss_mb() - before)
    per = [f"{1024 * growth / args.churn:.1f}" for growth in rounds]
    return {"rss_growth_mb": [round(r, 1) for r in rounds], "kb_per_connection": per}


ATTACKS: dict[str, tuple[str, Callable[[Target, argparse.Namespace], Result]]] = {
    "items": ("one 16 MiB frame of 16 M one-byte items", tiny_items),
    "big": ("one valid 16 MiB message (a 16 MiB argument)", big_string),
    "stalled": ("4 headers declaring 64 MiB, nothing more, held", stalled_headers),
    "half": ("4 frames announcing 32 MiB, 31 MiB sent each, then silence", half_frames),
    "unread": ("a client that asks and never reads", never_reads),
    "idle": ("idle connections, three phases", idle_connections),
    "churn": ("connect, status, close, twice", churn),
}


def run_attack(keys: Path, args: argparse.Namespace, key: str) -> Result:
    """One attack against a daemon of its own: what one attack leaves behind does not
    weigh on the next one's numbers."""
    name, attack = ATTACKS[key]
    target = Target(keys, args.config)
    try:
        time.sleep(3)  # the peers have joined and settled
        target.reset_peak()
        before = target.rss_mb()
        out = attack(target, args)
        time.sleep(2)  # the attack's connections are closed on the peer's side too
        watch = out.pop("watch", None)
        row = {
            "attack": name,
            "idle_rss_mb": round(before, 1),
            "peak_growth_mb": round(target.rss_mb("VmHWM") - before, 1),
            "after_mb": round(target.rss_mb() - before, 1),
            "seen": watch.line() if watch else "",
            **{k: round(v, 2) if isinstance(v, float) else v for k, v in out.items()},
        }
        if watch and watch.notes:
            row["notes"] = watch.notes
        return row
    finally:
        target.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", nargs="*", choices=sorted(ATTACKS), default=list(ATTACKS))
    parser.add_argument("--hold", type=float, default=30.0, help="seconds (stalled)")
    parser.add_argument("--idle", type=int, default=500, help="connections per phase")
    parser.add_argument("--churn", type=int, default=2000, help="connections per round")
    parser.add_argument("--config", type=Path, help="a TOML config for the daemon")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    keys = Path(tempfile.mkdtemp(prefix="satind-bench-"))
    _satind("keys", "init", str(keys))
    _satind("keys", "issue", str(keys), "h1")
    for client in ("attacker", "monitor"):
        _satind("keys", "issue", "--client", str(keys), client)
    rows = []
    try:
        for key in args.only:
            rows.append(run_attack(keys, args, key))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(keys, ignore_errors=True)
    if args.json:
        print(json.dumps(rows))
        return
    print("| attack | peak RSS growth (MB) | RSS after (MB) | h1/0 seen by others | details |")
    print("|---|---|---|---|---|")
    for row in rows:
        details = ", ".join(
            f"{k} {v}"
            for k, v in row.items()
            if k not in ("attack", "peak_growth_mb", "after_mb", "seen")
        )
        print(
            f"| {row['attack']} | {row['peak_growth_mb']} | {row['after_mb']} | "
            f"{row['seen']} | {details} |"
        )


if __name__ == "__main__":
    main()
