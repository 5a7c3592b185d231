"""Per-run logs on real processes: what a plugin prints or logs inside its jobs reaches
`satind run` (stderr, as it happens) and `satind logs RUN_ID [--follow]` from any peer."""

from __future__ import annotations

import datetime
import json
import re
import time
from pathlib import Path

import pytest

from tests.integration.test_daemon import Daemon, client, client_in_background, satind

pytestmark = pytest.mark.slow
PLUGINS = str(Path(__file__).parent.parent / "data" / "plugins")


def hellos(text: str) -> list[str]:
    return re.findall(r"^(local/\d|m1/\d): leaf (\d) says hello$", text, re.M)


def stamped_hellos(text: str) -> list[tuple[str, str]]:
    """`satind logs` lines: when the peer wrote each, in UTC to the millisecond, first."""
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
    return re.findall(rf"^({stamp}) (m1/\d): leaf \d says hello$", text, re.M)


def test_satind_run_shows_what_jobs_print_and_log_on_stderr() -> None:
    done = satind("run", "chatty", "6", "--plugin-path", PLUGINS)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "result: 13"  # chatty(6) has 13 leaves
    assert "says hello" not in done.stdout
    assert len(hellos(done.stderr)) == 13, done.stderr
    logged = re.findall(r"^local/\d: WARNING chatty: leaf \d logs$", done.stderr, re.M)
    assert len(logged) == 13


def test_logs_from_any_peer_and_follow_until_the_run_ends(keys: Path) -> None:
    daemon = Daemon(keys, "m1", "east", "", "--plugin-path", PLUGINS)
    try:
        first, second = list(daemon.addresses.values())
        started = time.time()
        submitted = client(keys, first, "submit", "chatty", "6", "--wait", "--json")
        assert submitted.returncode == 0, submitted.stderr
        run_id = re.search(r'"run_id": "([^"]+)"', submitted.stdout)
        assert run_id is not None, submitted.stdout
        # The other peer relays to the run's master.
        shown = client(keys, second, "logs", run_id.group(1))
        assert shown.returncode == 0, shown.stderr
        stamped = stamped_hellos(shown.stdout)
        assert len(stamped) == 13, shown.stdout
        # Written during the run, by this machine's clock.
        written = [datetime.datetime.fromisoformat(at).timestamp() for at, _ in stamped]
        assert started - 1 <= min(written) <= max(written) <= time.time()
        plain = client(keys, second, "logs", run_id.group(1), "--no-timestamps")
        assert len(hellos(plain.stdout)) == 13, plain.stdout

        # --follow prints lines as they come and returns when the run is over: 89 leaves
        # of 10 ms each.
        queued = client(keys, first, "submit", "chatty", "10")
        assert queued.returncode == 0, queued.stderr
        rid = queued.stdout.split()[-1]
        follow = client_in_background(keys, second, "logs", rid, "--follow")
        out, err = follow.communicate(timeout=60)
        assert follow.returncode == 0, err
        assert len(stamped_hellos(out)) == 89, out

        unknown = client(keys, second, "logs", "no-such-run")
        assert unknown.returncode != 0
        assert "no run no-such-run" in unknown.stderr
        empty = client(keys, second, "logs", "")
        assert empty.returncode == 2 and "a run id cannot be empty" in empty.stderr

        # A run that printed nothing says so, on stderr.
        quiet = client(keys, first, "submit", "fib", "10", "--wait", "--json")
        assert quiet.returncode == 0, quiet.stderr
        nothing = client(keys, second, "logs", json.loads(quiet.stdout)["run_id"])
        assert (nothing.returncode, nothing.stdout) == (0, ""), nothing.stderr
        assert "(no output)" in nothing.stderr
    finally:
        daemon.kill()
