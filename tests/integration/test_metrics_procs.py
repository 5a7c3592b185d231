"""The metrics endpoint of real daemon peers: it parses with Prometheus' own text parser, its
counters grow with a run, and garbage sent to it costs the peer nothing."""

from __future__ import annotations

import json
import re
import socket
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.test_daemon import Daemon, client, wait_for

pytestmark = pytest.mark.slow


def scrape(url: str) -> dict[str, float]:
    """Every sample of the endpoint, by name (labels checked on the way)."""
    with urllib.request.urlopen(url, timeout=10) as reply:
        assert reply.status == 200
        assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = reply.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("satind_") and "le" not in sample.labels:
                assert set(sample.labels) == {"peer", "cluster"}
                assert sample.labels["cluster"] == "east"
            out[sample.name] = sample.value
    return out


def test_metrics_parse_grow_with_a_run_and_survive_garbage(keys: Path) -> None:
    daemon = Daemon(keys, "m1", "east", "", "--metrics-port", "0")
    try:
        found = re.search(r"satind m1 metrics: (.*)", daemon.log.read_text())
        assert found, daemon.log.read_text()
        urls = dict(part.split("=") for part in found.group(1).split(", "))
        assert set(urls) == {"m1/0", "m1/1"}
        assert all(u.startswith("http://127.0.0.1:") for u in urls.values())
        assert len(set(urls.values())) == 2

        # The daemon logs its metrics URLs once its peers are up, not once they know each
        # other: the gauge may say 1 for a moment (CI failed so once).
        wait_for(lambda: all(scrape(u)["satind_members_alive"] == 2 for u in urls.values()))
        befores = [scrape(u) for u in urls.values()]
        before = befores[0]
        for name in ("satind_jobs_run_total", "satind_spawns_total", "satind_stolen_local_total"):
            assert name in before
        assert before["satind_members_alive"] == 2
        assert before["process_resident_memory_bytes"] > 0

        done = client(keys, daemon.first, "submit", "fib", "20", "--wait", "--json")
        assert done.returncode == 0, done.stderr
        after = [scrape(u) for u in urls.values()]
        # Every job of the run was run on one of the two peers (which one is placement's
        # and stealing's choice: the run may be placed on either), and counted there.
        jobs = json.loads(done.stdout)["stats"]["jobs_run"]
        assert jobs > 0
        grown = sum(a["satind_jobs_run_total"] for a in after) - sum(
            b["satind_jobs_run_total"] for b in befores
        )
        assert grown == jobs

        port = int(urls["m1/0"].rsplit(":", 1)[1].split("/")[0])
        # Garbage without an end, and a request head past the cap: closed unanswered.
        for junk in (b"\x00\xffgarbage", b"GET /metrics HTTP/1.0\r\n" + b"X" * 100_000):
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                try:
                    sock.sendall(junk)
                    assert sock.recv(100) == b""
                except ConnectionResetError:
                    pass  # closed with our bytes unread
        # A wrong path is a 404; the peer still serves and still runs.
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(urls["m1/0"].replace("/metrics", "/nope"), timeout=10)
        assert missing.value.code == 404
        assert scrape(urls["m1/0"])["satind_members_alive"] == 2
        again = client(keys, daemon.first, "submit", "fib", "15", "--wait", "--json")
        assert again.returncode == 0, again.stderr
    finally:
        daemon.kill()
