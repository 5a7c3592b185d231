"""Whatever a plugin module does when it is imported costs that plugin only: printing,
writing to stdout or stderr, sys.exit, raising, os._exit, looping forever. `satind run` and a
daemon (at start, at `satind plugins reload`, when it restarts a crashed peer) go on with the
other plugins and name each file they did not load. A helper module in a plugin directory is
never executed unless a plugin imports it."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest

from tests.integration.procs import alive, children_of
from tests.integration.test_daemon import Daemon, client, satind, status, wait_for

pytestmark = pytest.mark.slow


def plugin_source(name: str, prologue: str = "") -> str:
    """A plugin ``name`` that doubles its argument, with ``prologue`` run first at import."""
    return (
        prologue
        + "from satind import Plugin, spawnable\n"
        + "@spawnable\n"
        + f"def {name}_double(x: int) -> int:\n"
        + "    return 2 * x\n"
        + f"PLUGIN = Plugin(name={name!r}, entry={name}_double, usage='{name} X',\n"
        + "                parse=lambda argv: (int(argv[0]),))\n"
    )


# File -> (what it does at import, what the message about it says).
BAD = {
    "exits.py": ("import sys\nsys.exit(3)\n", r"sys\.exit\(3\)"),
    "raises.py": ("raise RuntimeError('boom at import')\n", r"RuntimeError: boom at import"),
    "hardexit.py": ("import os\nos._exit(4)\n", r"exit(ed)? (with )?(code|status) 4"),
    "loops.py": (
        "import time\nwhile True:\n    time.sleep(0.01)\n",
        r"did not finish .* within 1(\.0)? s",
    ),
}
# Plugins that only write at import: they load and work, their output goes to stderr.
NOISY = {
    "printer.py": "print('hello from printer at import')\n",
    "spammer.py": (
        "import os, sys\n"
        "sys.stderr.write('x' * 300_000 + '\\n')\n"
        "sys.stdout.write('{not json\\n')\n"
        "sys.stdout.flush()\n"
        "os.write(1, b'raw stdout garbage\\n')\n"
    ),
}


def helper_source(marker: Path) -> str:
    # Not a plugin (no PLUGIN): satind must not execute it.
    return (
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\nraise SystemExit(3)\n"
    )


def fast_config(tmp_path: Path) -> Path:
    config = tmp_path / "fast.toml"
    config.write_text("[plugins]\nimport_timeout_s = 1.0\n\n[daemon]\nrestart_delay_s = 0.2\n")
    return config


def write_good(directory: Path, marker: Path) -> None:
    """A good plugin, one that prints at import, and a helper that exits."""
    directory.mkdir(exist_ok=True)
    (directory / "good.py").write_text(plugin_source("good"))
    (directory / "printer.py").write_text(plugin_source("printer", NOISY["printer.py"]))
    (directory / "helper.py").write_text(helper_source(marker))


def write_the_rest(directory: Path) -> None:
    for file, (prologue, _) in BAD.items():
        (directory / file).write_text(plugin_source(file[:-3], prologue))
    (directory / "spammer.py").write_text(plugin_source("spammer", NOISY["spammer.py"]))


def assert_bad_ones_named(text: str, directory: Path) -> None:
    for file, (_, why) in BAD.items():
        lines = [line for line in text.splitlines() if str(directory / file) in line]
        assert lines, f"{file} not named in:\n{text[-5000:]}"
        assert any(re.search(why, line) for line in lines), (file, lines)


def test_satind_run_loads_the_plugins_that_import_cleanly_and_names_the_others(
    tmp_path: Path,
) -> None:
    plugins, marker = tmp_path / "plugins", tmp_path / "helper-ran"
    write_good(plugins, marker)
    write_the_rest(plugins)
    config = fast_config(tmp_path)
    common = ["--plugin-path", str(plugins), "--config", str(config)]

    done = satind("run", "printer", "21", "--peers", "2", *common, "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)  # stdout is the JSON object and nothing else
    assert out["result"] == 42
    assert "hello from printer at import" in done.stderr
    assert "raw stdout garbage" in done.stderr  # os.write(1, ...) at import: stderr too
    assert_bad_ones_named(done.stderr, plugins)
    assert not marker.exists()  # the helper was never executed

    listed = satind("plugins", *common, "--json", timeout=120)
    assert listed.returncode == 0, listed.stderr
    names = {p["name"] for p in json.loads(listed.stdout)}
    assert {"good", "printer", "spammer"} <= names
    assert not names & {"exits", "raises", "hardexit", "loops"}
    assert_bad_ones_named(listed.stderr, plugins)
    assert not marker.exists()


def test_a_daemon_survives_bad_plugins_at_reload_and_a_peer_crash_after(
    keys: Path, tmp_path: Path
) -> None:
    plugins, marker = tmp_path / "plugins", tmp_path / "helper-ran"
    write_good(plugins, marker)
    config = fast_config(tmp_path)
    # A plugin that prints at import, and a helper that exits, from the start.
    daemon = Daemon(keys, "m1", "east", "", "--plugin-path", str(plugins), "--config", str(config))
    try:
        first = daemon.first
        wait_for(lambda: [p["state"] for p in status(keys, first)["peers"]] == ["alive"] * 2)
        for name in ("good", "printer"):
            done = client(keys, first, "submit", name, "21", "--wait", "--json")
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["result"] == 42

        write_the_rest(plugins)
        reloaded = client(keys, first, "plugins", "reload", timeout=120)
        assert reloaded.returncode == 0, reloaded.stderr
        assert reloaded.stdout.count("added spammer") == 2, reloaded.stdout
        assert_bad_ones_named(reloaded.stdout, plugins)
        done = client(keys, first, "submit", "spammer", "4", "--wait", "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["result"] == 8

        # The next crash of a peer: the daemon restarts it, with the same plugins.
        victim = daemon.children[1]
        os.kill(victim, signal.SIGKILL)
        wait_for(lambda: len(daemon.peers()) == 2 and victim not in daemon.peers().values())
        peers: list[dict[str, str]] = []

        def both_alive() -> bool:
            peers[:] = status(keys, first)["peers"]
            return [p["state"] for p in peers] == ["alive"] * 2

        wait_for(both_alive)
        assert daemon.proc.poll() is None
        # The new instance listens on a new port (the daemon's ports are 0 here).
        second = {p["slot"]: p["address"] for p in peers}["m1/1"]
        listed = client(keys, second, "plugins", "--json")
        assert listed.returncode == 0, listed.stderr
        members = json.loads(listed.stdout)
        assert len(members) == 2, members  # both peers, the same list
        for member in members:
            names = {p["name"] for p in member["plugins"]}
            assert {"good", "printer", "spammer"} <= names
            assert not names & {"exits", "raises", "hardexit", "loops"}
        for name in ("printer", "good"):
            done = client(keys, second, "submit", name, "5", "--wait", "--json")
            assert done.returncode == 0, done.stderr
            assert json.loads(done.stdout)["result"] == 10
        assert not marker.exists()
        log = daemon.log.read_text()
        assert "hello from printer at import" in log
        assert_bad_ones_named(log, plugins)

        children = children_of(daemon.proc.pid)
        assert client(keys, first, "stop").returncode == 0
        assert daemon.proc.wait(timeout=30) == 0
        wait_for(lambda: not any(alive(p) for p in children), 10)
    finally:
        daemon.kill()
