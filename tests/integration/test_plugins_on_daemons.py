"""Plugins on running daemons: each member's list (`plugins --to`), reload (command and
SIGHUP) without a restart, a plugin directory as a package root, and the hooks of a run
(parse, check, report) on its master, whatever the submitter has."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.integration.test_daemon import Daemon, client, wait_for

pytestmark = pytest.mark.slow

HELPER = "SCALE = {scale}\n\ndef scaled(x: int) -> int:\n    return x * SCALE\n"
PLUGIN = """
import helper
from satind import Plugin, UsageError, spawnable, sync


@spawnable
def total(n: int) -> int:
    if n < 2:
        return helper.scaled(n)
    a, b = total.spawn(n - 1), total.spawn(n - 2)
    sync()
    return int(a.result()) + int(b.result())


def parse(argv):
    if len(argv) != 1:
        raise UsageError("give N")
    return (int(argv[0]),)


def check(args, result):
    if result % helper.SCALE:
        raise AssertionError(f"{{result}} is not a multiple of {{helper.SCALE}}")


PLUGIN = Plugin(
    name="scaledfib", entry=total, usage="scaledfib N", parse=parse, check=check,
    report=lambda argv, result: {{"n": int(argv[0]), "scaled": result}},
)
"""


def write_plugins(directory: Path, scale: int) -> None:
    directory.mkdir(exist_ok=True)
    (directory / "helper.py").write_text(HELPER.format(scale=scale))
    (directory / "scaledfib.py").write_text(PLUGIN.format())


def run_json(keys: Path, to: str, *argv: str) -> dict[str, object]:
    done = client(keys, to, "submit", *argv, "--wait", "--json")
    assert done.returncode == 0, done.stderr
    out: dict[str, object] = json.loads(done.stdout)
    return out


def test_hooks_run_on_the_master_and_reload_picks_up_new_code(keys: Path, tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    write_plugins(plugins, 3)
    daemon = Daemon(keys, "m1", "east", "", "--plugin-path", str(plugins))
    try:
        first = daemon.first
        # The client has no copy of the plugin (no --plugin-path): the master parses, checks
        # and reports. fib(10) = 55 leaves of value 1 (n=1) -> 55 * 3.
        out = run_json(keys, first, "scaledfib", "10")
        assert out["result"] == {"n": 10, "scaled": 165}
        assert out["check"] == "ok"
        bad = client(keys, first, "submit", "scaledfib", "x", "y")
        assert bad.returncode == 2 and "give N" in bad.stderr and "usage:" in bad.stderr

        # Every member's list: both peers of the daemon, one group, the plugin's hash.
        listed = client(keys, first, "plugins")
        assert listed.returncode == 0, listed.stderr
        assert "m1/0, m1/1:" in listed.stdout and "scaledfib" in listed.stdout
        before = json.loads(client(keys, first, "plugins", "--json").stdout)
        hashes = {p["code_hash"] for m in before for p in m["plugins"] if p["name"] == "scaledfib"}
        assert len(hashes) == 1

        # Unknown plugins list what the system has.
        unknown = client(keys, first, "submit", "nosuch", "1")
        assert unknown.returncode == 2
        assert "unknown plugin 'nosuch'" in unknown.stderr and "scaledfib" in unknown.stderr

        # A changed helper is a changed plugin; `reload` takes it, and a new file, on every
        # member without a restart.
        write_plugins(plugins, 5)
        (plugins / "extra.py").write_text(
            PLUGIN.format().replace('name="scaledfib"', 'name="extra"')
        )
        reloaded = client(keys, first, "plugins", "reload")
        assert reloaded.returncode == 0, reloaded.stderr
        assert reloaded.stdout.count("added extra; changed scaledfib") == 2, reloaded.stdout
        out = run_json(keys, first, "scaledfib", "10")
        assert out["result"] == {"n": 10, "scaled": 275}
        assert run_json(keys, first, "extra", "10")["check"] == "ok"

        # SIGHUP to the daemon: the same, from each peer's plugin paths.
        write_plugins(plugins, 7)
        daemon.proc.send_signal(signal.SIGHUP)

        def seven() -> bool:
            # Until both peers have reloaded, the master refuses the run (hashes differ).
            done = client(keys, first, "submit", "scaledfib", "10", "--wait", "--json")
            return done.returncode == 0 and json.loads(done.stdout)["result"] == {
                "n": 10,
                "scaled": 385,
            }

        wait_for(seven)
        assert daemon.proc.poll() is None  # SIGHUP does not stop it
    finally:
        daemon.kill()
