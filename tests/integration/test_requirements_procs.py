"""What a run needs of a member (plugin/requirements.py), on real daemons with the shipped
defaults: a plugin requires a distribution that one machine has (a stand-in distribution on
that daemon's import path) and the other lacks. The run goes on the machine that has it and
the other takes no part, saying why in `status` and `plugins`; a submission to a peer that
lacks it, or of a plugin no member can serve, is refused at once."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_daemon import Daemon, client, satind, status, wait_for

pytestmark = pytest.mark.slow

PLUGIN = """
import time

import satind


@satind.spawnable
def count(lo: int, hi: int, leaf_s: float) -> int:
    if hi - lo <= 100:
        time.sleep(leaf_s)
        return hi - lo
    mid = (lo + hi) // 2
    a, b = count.spawn(lo, mid, leaf_s), count.spawn(mid, hi, leaf_s)
    satind.sync()
    return a.result() + b.result()


def parse(argv):
    return 0, int(argv[0]), float(argv[1]) if len(argv) > 1 else 0.0


PLUGIN = satind.Plugin(
    name="needy", entry=count, usage="needy N [LEAF_S]", parse=parse,
    requires=["satind-stand-in>=1.0"],
)
PLUGIN_NOBODY = satind.Plugin(
    name="nobody", entry=count, usage="nobody N", parse=parse,
    requires=["satind-absent-anywhere"],
)
"""


@pytest.fixture(scope="module")
def machines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Daemon, Daemon]]:
    keys = tmp_path_factory.mktemp("keys")
    plugins = tmp_path_factory.mktemp("plugins")
    (plugins / "needy.py").write_text(PLUGIN)
    # A distribution only m1's peers can see: its metadata on their import path.
    site = tmp_path_factory.mktemp("site")
    info = site / "satind_stand_in-1.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: satind-stand-in\nVersion: 1.2\n")
    assert satind("keys", "init", str(keys)).returncode == 0
    for name in ("m1", "m2"):
        assert satind("keys", "issue", str(keys), name).returncode == 0
    started: list[Daemon] = []
    saved = os.environ.get("PYTHONPATH")
    try:
        os.environ["PYTHONPATH"] = str(site) + (os.pathsep + saved if saved else "")
        started.append(Daemon(keys, "m1", "east", "", "--plugin-path", str(plugins)))
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
        started.append(Daemon(keys, "m2", "west", started[0].first, "--plugin-path", str(plugins)))
        wait_for(lambda: len(status(keys, started[0].first)["peers"]) == 4)
        yield keys, started[0], started[1]
    finally:
        if saved is not None:
            os.environ["PYTHONPATH"] = saved
        for daemon in started:
            daemon.kill()


def test_members_without_a_requirement_take_no_part_and_say_why(
    machines: tuple[Path, Daemon, Daemon],
) -> None:
    keys, m1, _ = machines
    before = {p["slot"]: p["jobs_run"] for p in status(keys, m1.first)["peers"]}
    proc = client(keys, m1.first, "submit", "needy", "200000", "--wait", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"] == 200000
    after = {p["slot"]: p["jobs_run"] for p in status(keys, m1.first)["peers"]}
    assert after["m2/0"] == before["m2/0"] and after["m2/1"] == before["m2/1"]
    assert after["m1/0"] + after["m1/1"] > before["m1/0"] + before["m1/1"]

    listed = client(keys, m1.first, "plugins")
    assert "takes no part in its runs: it requires satind-stand-in>=1.0 (not installed)" in (
        listed.stdout
    )
    # While a run goes on, the members that cannot serve it say so in `status`.
    long = client(keys, m1.first, "submit", "needy", "100000", "0.05")  # 1,000 leaves of 50 ms
    run_id = long.stdout.strip()
    try:

        def saying() -> list[str]:
            peers = status(keys, m1.first)["peers"]
            return [line for p in peers if p["slot"].startswith("m2/") for line in p["not_serving"]]

        wait_for(lambda: len(saying()) == 2)
        assert all(run_id in line and "satind-stand-in>=1.0" in line for line in saying())
    finally:
        client(keys, m1.first, "cancel", run_id)


def test_a_peer_without_it_or_a_plugin_nobody_can_serve_is_refused_at_once(
    machines: tuple[Path, Daemon, Daemon],
) -> None:
    keys, m1, m2 = machines
    refused = client(keys, m2.first, "submit", "needy", "1000")
    assert refused.returncode == 3
    assert "requires satind-stand-in>=1.0 (not installed)" in refused.stderr
    assert "submit to one that has them: m1/" in refused.stderr
    nobody = client(keys, m1.first, "submit", "nobody", "1000")
    assert nobody.returncode == 3 and "satind-absent-anywhere" in nobody.stderr
