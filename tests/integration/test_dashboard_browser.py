"""The web dashboard in a real headless browser (node/dashboard.py): Chromium from the
distribution's packages (.ci/run installs it), driven by Playwright. Two daemons with the
shipped defaults but a dashboard and its token: the page loads over the real endpoint, shows
the peers, a run's progress advances live, and the run's page shows its log and serves its
trace, under the page's content policy; the token is traded for a cookie that is not it by a
redirect that takes it out of the address. Without the token a request gets 401.

SATIND_SCREENSHOTS=docs takes the pictures of docs/operations.md on the way. Set
SATIND_NO_BROWSER=1 to skip it on a machine without Chromium; without that, a missing
Chromium fails the test (it must run in CI)."""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from satind.node.dashboard import COOKIE, session_value
from tests.integration.procs import free_ports
from tests.integration.test_daemon import Daemon, client, status, wait_for

pytestmark = pytest.mark.slow
PLUGINS = str(Path(__file__).parent.parent / "data" / "plugins")
TOKEN = "k3y-for-the-test"
CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
# The flags a root user in a container needs, and none that reach for the network.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium() -> str:
    if os.environ.get("SATIND_NO_BROWSER") == "1":
        pytest.skip("SATIND_NO_BROWSER=1: the dashboard's browser test is not run")
    for name in CHROMIUM:
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError(
        "no Chromium for the dashboard's browser test: install the distribution's package "
        "(apt-get install chromium; .ci/run does), or set SATIND_NO_BROWSER=1 to skip it"
    )


@pytest.fixture
def dashboards(keys: Path, tmp_path: Path) -> Iterator[tuple[Daemon, Daemon, int]]:
    config = tmp_path / "dashboard.toml"
    config.write_text(f'[dashboard]\ntoken = "{TOKEN}"\n')
    port = free_ports(4)
    flags = ("--config", str(config), "--plugin-path", PLUGINS, "--dashboard-port")
    m1 = Daemon(keys, "m1", "east", "", *flags, str(port))
    m2: Daemon | None = None
    try:
        m2 = Daemon(keys, "m2", "west", m1.first, *flags, str(port + 2))
        yield m1, m2, port
    finally:
        m1.kill()
        if m2 is not None:
            m2.kill()


def test_the_dashboard_shows_the_peers_and_a_run_advancing_in_a_real_browser(
    keys: Path, dashboards: tuple[Daemon, Daemon, int]
) -> None:
    from playwright.sync_api import ConsoleMessage, expect, sync_playwright

    executable = chromium()
    m1, _, port = dashboards
    base = f"http://127.0.0.1:{port}"
    wait_for(lambda: len(status(keys, m1.first)["peers"]) == 4)
    # Without the token: refused, saying how.
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{base}/api/status", timeout=10)
    assert refused.value.code == 401
    # A run of a few seconds (256 leaves of 100 ms on 4 peers), submitted on m1.
    proc = client(keys, m1.first, "submit", "chatty", "12")
    assert proc.returncode == 0, proc.stderr
    quick = proc.stdout.strip()
    proc = client(keys, m1.first, "submit", "explode", "2", "0")  # fails in a leaf
    assert proc.returncode == 0, proc.stderr
    failed = proc.stdout.strip()
    proc = client(keys, m1.first, "submit", "tree", "4", "4", "100", "sleep")
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=FLAGS)
        try:
            page = browser.new_page()
            # What the browser refused to run or load: the page's content policy must let
            # its own script and style through (by their hashes), and nothing else is asked.
            blocked: list[str] = []

            def said(msg: ConsoleMessage) -> None:
                if "Content Security Policy" in msg.text:
                    blocked.append(msg.text)

            page.on("console", said)
            page.goto(f"{base}/?token={TOKEN}", timeout=30_000)
            # Traded for a cookie by a redirect: the token is neither in the address bar
            # (nor the history) nor the cookie.
            assert page.url == f"{base}/"
            (cookie,) = page.context.cookies()
            assert cookie["name"] == COOKIE and cookie["value"] == session_value(TOKEN)
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
            # The peers of both machines, live.
            expect(page.locator("#live")).to_have_class("on", timeout=20_000)
            peers = page.locator("#peers tbody tr")
            expect(peers).to_have_count(4, timeout=20_000)
            names = peers.all_inner_texts()
            for slot in ("m1/0", "m1/1", "m2/0", "m2/1"):
                assert any(line.startswith(slot) for line in names), names
            # The run's progress advances (the page updates itself: no reload).
            row = page.locator(f'#runs tbody tr[data-run="{run_id}"]')
            expect(row).to_have_count(1, timeout=20_000)

            def progress() -> float:
                found = re.search(r"([\d.]+)%", row.inner_text())
                return float(found.group(1)) if found else -1.0

            first = progress()
            deadline = time.monotonic() + 60
            while progress() <= first and time.monotonic() < deadline:
                time.sleep(0.2)
            assert progress() > first, (first, row.inner_text())
            # The task stream: the running run's jobs on the peers, a box per job without a
            # local parent, and the run in the legend; each peer's sparklines (CPU, queue,
            # RSS over the last minutes).
            expect(page.locator("#stream rect").first).to_be_attached(timeout=20_000)
            # (A box once a job ended: the first boxes may be steals alone.)
            expect(page.locator("#stream-legend")).to_contain_text(run_id, timeout=60_000)
            # A row of the other machine's peers: jobs stolen there (wide-area).
            expect(page.locator("#stream text", has_text="m2/").first).to_be_attached(
                timeout=20_000
            )
            expect(page.locator("#peers tbody tr").first.locator("svg.spark")).to_have_count(3)
            shots = os.environ.get("SATIND_SCREENSHOTS")  # docs/operations.md's pictures
            if shots:
                page.screenshot(path=f"{shots}/dashboard.png", full_page=True)
            expect(row).to_contain_text("done", timeout=60_000)
            expect(row).to_contain_text("100.0%")
            # A run's page: its line, its log (the master's), its trace.
            page.locator(f'#runs tbody tr[data-run="{quick}"] a').click()
            expect(page.locator("#run-title")).to_have_text(f"run {quick}", timeout=10_000)
            expect(page.locator("#run-line")).to_contain_text("chatty 12")
            expect(page.locator("#log")).to_contain_text("says hello", timeout=20_000)
            # Its value (the plugin's report of it) and check, and its task stream by spawnable.
            expect(page.locator("#run-result")).to_contain_text("check: ", timeout=20_000)
            expect(page.locator("#run-stream rect").first).to_be_attached(timeout=20_000)
            expect(page.locator("#run-legend")).to_contain_text("chatty")
            href = page.locator("#trace").get_attribute("href")
            assert href is not None
            answer = page.request.get(base + href)
            assert answer.ok
            trace = json.loads(answer.body())
            assert any(e.get("ph") == "X" for e in trace["traceEvents"])
            assert answer.headers["content-disposition"].startswith("attachment")
            if shots:
                page.screenshot(path=f"{shots}/dashboard-run.png", full_page=True)
            # A failed run's page: the error, with the traceback from the peer that raised.
            page.goto(f"{base}/#run/{failed}")
            expect(page.locator("#run-result .error")).to_contain_text(
                "ValueError: boom in a leaf", timeout=20_000
            )
            expect(page.locator("#run-result pre")).to_contain_text("Traceback")
            expect(page.locator("#run-result pre")).to_contain_text("explode")
            if shots:
                page.screenshot(path=f"{shots}/dashboard-failed.png", full_page=True)
            # The tree run's page: its jobs by spawnable, and who stole from whom.
            page.goto(f"{base}/#run/{run_id}")
            expect(page.locator("#by-fn tbody")).to_contain_text("node", timeout=20_000)
            expect(page.locator("#steals tbody tr").first).to_contain_text("m")
            assert "none" not in page.locator("#steals tbody").inner_text()
            # The run history's rows, as the main page's "Earlier runs" reads them.
            records = json.loads(page.request.get(base + "/api/runs").body())
            assert {quick, failed} <= {r["run_id"] for r in records}
            assert blocked == []
        finally:
            browser.close()


def test_over_tls_the_dashboard_answers_only_a_certificate_of_the_cluster(
    keys: Path, tmp_path: Path
) -> None:
    config = tmp_path / "dashboard.toml"
    config.write_text("[dashboard]\ntls = true\n")
    port = free_ports(1)
    m1 = Daemon(keys, "m1", "east", "", "--config", str(config), "--dashboard-port", str(port))
    try:
        wait_for(lambda: f"dashboard on https://127.0.0.1:{port}/" in m1.log.read_text())
        context = ssl.create_default_context(cafile=str(keys / "ca.pem"))
        context.check_hostname = False  # peers are named by their certificates, not hosts
        context.load_cert_chain(keys / "client.pem", keys / "client.key")

        def slots() -> set[str]:
            with urllib.request.urlopen(
                f"https://127.0.0.1:{port}/api/status", context=context, timeout=10
            ) as got:
                return {p["slot"] for p in json.loads(got.read())["peers"]}

        # The dashboard is up with the daemon's first peer; the second joins a moment later.
        assert "m1/0" in slots()
        wait_for(lambda: slots() == {"m1/0", "m1/1"})
        # Without a client certificate the handshake fails: nothing is served.
        bare = ssl.create_default_context(cafile=str(keys / "ca.pem"))
        bare.check_hostname = False
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(
                f"https://127.0.0.1:{port}/api/status", context=bare, timeout=10
            ).read()
    finally:
        m1.kill()


def test_bound_elsewhere_without_tls_or_a_token_it_refuses_to_serve(
    keys: Path, tmp_path: Path
) -> None:
    config = tmp_path / "dashboard.toml"
    config.write_text('[dashboard]\nhost = "0.0.0.0"\n')  # refused before it binds anything
    m1 = Daemon(keys, "m1", "east", "", "--config", str(config), "--dashboard-port", "0")
    try:
        wait_for(lambda: "no dashboard: the dashboard would serve 0.0.0.0" in m1.log.read_text())
        proc = client(keys, m1.first, "submit", "fib", "20", "--wait", "--json")
        assert proc.returncode == 0 and json.loads(proc.stdout)["result"] == 6765
    finally:
        m1.kill()
