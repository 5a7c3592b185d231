"""Over TLS the dashboard reads as the browser's certificate may read through the control
plane (node/permissions.py), on a real daemon: a client with the submit grant sees the
arguments of its own runs only and the pages, traces and live snapshots of no one else's
runs, an operator everything; `satind status` hides other clients' arguments the same way.
With a token too, the cookie it trades the token for is Secure."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

import satind
from satind.node.dashboard import COOKIE, session_value
from tests.integration.procs import free_ports
from tests.integration.test_daemon import Daemon, client, status, wait_for
from tests.integration.test_daemon import satind as satind_cli

pytestmark = pytest.mark.slow
TOKEN = "grants-t0ken"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Daemon, int, str]]:
    """A daemon whose dashboard is TLS and a token; alice's run of fib 20, done."""
    keys = tmp_path_factory.mktemp("keys")
    assert satind_cli("keys", "init", str(keys)).returncode == 0
    assert satind_cli("keys", "issue", str(keys), "m1").returncode == 0
    for name in ("alice", "bob"):
        assert satind_cli("keys", "issue", str(keys), name, "--client").returncode == 0
    issued = satind_cli("keys", "issue", str(keys), "ops", "--client", "--may-operate")
    assert issued.returncode == 0
    config = keys / "dashboard.toml"
    config.write_text(f'[dashboard]\ntls = true\ntoken = "{TOKEN}"\n')
    port = free_ports(2)
    daemon = Daemon(keys, "m1", "c0", "", "--config", str(config), "--dashboard-port", str(port))
    try:
        wait_for(lambda: len(status(keys, daemon.first)["peers"]) == 2)
        with satind.connect(daemon.first, keys, name="alice") as alice:
            run = alice.submit("fib", "20")
            assert run.result(timeout=120) == 6765
        yield keys, daemon, port, run.id
    finally:
        daemon.kill()


def fetch(
    keys: Path, port: int, who: str, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """GET ``path`` from the dashboard with ``who``'s client certificate (no redirect
    followed); a live stream's head and first event only."""
    context = ssl.create_default_context(cafile=str(keys / "ca.pem"))
    context.check_hostname = False  # peers are named by their certificates, not hosts
    context.load_cert_chain(keys / f"{who}.pem", keys / f"{who}.key")
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
    try:
        conn.request("GET", path, headers=BEARER if headers is None else headers)
        answer = conn.getresponse()
        got = {k.lower(): v for k, v in answer.getheaders()}
        if got.get("content-type") == "text/event-stream":
            body = b""
            while not body.endswith(b"\n\n"):
                body += answer.fp.readline()
            return answer.status, got, body
        return answer.status, got, answer.read()
    finally:
        conn.close()


def run_line(snapshot: bytes, run_id: str) -> dict[str, object]:
    runs = json.loads(snapshot.decode().removeprefix("data: "))["runs"]
    found: dict[str, object] = next(r for r in runs if r["run_id"] == run_id)
    return found


def test_a_submitter_reads_its_own_runs_and_an_operator_every_run(
    system: tuple[Path, Daemon, int, str],
) -> None:
    keys, _, port, run_id = system
    for who, sees in (("alice", ["20"]), ("ops", ["20"]), ("bob", [])):
        code, _, body = fetch(keys, port, who, "/api/status")
        assert code == 200 and run_line(body, run_id)["argv"] == sees, who
        code, got, body = fetch(keys, port, who, "/api/events")
        assert code == 200 and got["content-type"] == "text/event-stream"
        assert run_line(body, run_id)["argv"] == sees, who
    for who in ("alice", "ops"):
        code, _, body = fetch(keys, port, who, f"/api/run/{run_id}")
        page = json.loads(body)
        assert code == 200 and page["found"] and page["record"]["argv"] == ["20"], who
        code, _, body = fetch(keys, port, who, f"/api/run/{run_id}/trace.json")
        assert code == 200 and "traceEvents" in json.loads(body)
    for path in (f"/api/run/{run_id}", f"/api/run/{run_id}/trace.json"):
        code, _, body = fetch(keys, port, "bob", path)
        assert code == 403, path
        assert b"submitted by alice" in body and b"'operate' grant" in body
        assert b"fib" not in body


def test_satind_status_hides_other_clients_arguments_as_satind_runs_does(
    system: tuple[Path, Daemon, int, str],
) -> None:
    keys, daemon, _, run_id = system
    for who, sees in (("alice", ["20"]), ("ops", ["20"]), ("bob", [])):
        proc = client(keys, daemon.first, "status", "--json", "--as", who)
        assert proc.returncode == 0, proc.stderr
        line = next(r for r in json.loads(proc.stdout)["runs"] if r["run_id"] == run_id)
        assert line["argv"] == sees, who


def test_over_tls_the_token_is_traded_for_a_secure_cookie(
    system: tuple[Path, Daemon, int, str],
) -> None:
    keys, _, port, _ = system
    code, got, _ = fetch(keys, port, "alice", f"/?token={TOKEN}", {})
    assert code == 303 and got["location"] == "/"
    value = session_value(TOKEN)
    assert got["set-cookie"] == f"{COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/; Secure"
    assert fetch(keys, port, "alice", "/api/status", {"Cookie": f"{COOKIE}={value}"})[0] == 200
    assert fetch(keys, port, "alice", "/api/status", {})[0] == 401


def test_plain_http_to_the_tls_dashboard_is_closed_and_ends_nothing(
    system: tuple[Path, Daemon, int, str],
) -> None:
    keys, daemon, port, _ = system
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /api/status HTTP/1.0\r\n\r\n")
        with contextlib.suppress(ConnectionResetError):  # closed with our bytes unread
            assert not sock.recv(100).startswith(b"HTTP/1.0 200")
    assert fetch(keys, port, "ops", "/api/status")[0] == 200
    assert len(daemon.peers()) == 2
