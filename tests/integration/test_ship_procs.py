"""Shipped code on real daemons (plugin/shipped.py): a plugin directory with a helper module,
sent with a submission to two daemons that do not have it, runs exactly; a client without
the "ship" grant, or peers that do not accept shipped code, are refused at once, saying why;
a member that joins mid-run fetches the code and takes part; two versions of one plugin name
shipped one after the other never mix."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import satind
from tests.integration.test_daemon import Daemon, client, status, wait_for
from tests.integration.test_daemon import satind as satind_cli

pytestmark = pytest.mark.slow
PLUGINS = Path(__file__).parent.parent.parent / "plugins"

PLUGIN = '''"""shipsum LO HI [LEAF_MS]: the sum of WEIGHT * i for LO <= i < HI (helper.py)."""

import time

import helper  # the shipped helper.py of this version (plugin/siblings.py)
import satind


@satind.spawnable
def weighted(lo: int, hi: int, leaf_ms: float) -> int:
    if hi - lo <= 1000:
        end = time.perf_counter() + leaf_ms / 1000
        while time.perf_counter() < end:
            pass
        return helper.WEIGHT * sum(range(lo, hi))
    mid = (lo + hi) // 2
    a = weighted.spawn(lo, mid, leaf_ms)
    b = weighted.spawn(mid, hi, leaf_ms)
    satind.sync()
    return a.result() + b.result()


PLUGIN = satind.Plugin(
    name="shipsum",
    entry=weighted,
    usage="shipsum LO HI [LEAF_MS]",
    parse=lambda argv: (int(argv[0]), int(argv[1]), float(argv[2]) if len(argv) > 2 else 0.0),
    max_branching=2,
)
'''

CONFIG = """
[plugins]
accept_shipped = true
"""


def plugin_dir(root: Path, weight: int) -> Path:
    directory = root / f"weight{weight}"
    directory.mkdir()
    (directory / "shipsum.py").write_text(PLUGIN)
    (directory / "helper.py").write_text(f"WEIGHT = {weight}\n")
    return directory


def expected(lo: int, hi: int, weight: int) -> int:
    return weight * sum(range(lo, hi))


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[Daemon]]]:
    keys = tmp_path_factory.mktemp("keys")
    assert satind_cli("keys", "init", str(keys)).returncode == 0
    for name in ("m1", "m2", "m3", "lone", "nay"):
        assert satind_cli("keys", "issue", str(keys), name).returncode == 0
    assert satind_cli("keys", "issue", str(keys), "plain", "--client").returncode == 0
    issued = satind_cli("keys", "issue", str(keys), "shipper", "--client", "--may-ship")
    assert "may submit, ship)" in issued.stdout
    config = keys / "ship.toml"
    config.write_text(CONFIG)
    started: list[Daemon] = []
    try:
        started.append(Daemon(keys, "m1", "c0", "", "--config", str(config)))
        started.append(Daemon(keys, "m2", "c0", started[0].first, "--config", str(config)))
        wait_for(lambda: len(status(keys, started[0].first)["peers"]) == 4)
        yield keys, started
    finally:
        for daemon in started:
            daemon.kill()


def test_a_shipped_plugin_with_a_helper_runs_exactly(
    system: tuple[Path, list[Daemon]], tmp_path: Path
) -> None:
    keys, daemons = system
    m1, m2 = daemons[0], daemons[1]
    directory = plugin_dir(tmp_path, 3)
    with satind.connect(m1.first, keys, name="shipper") as cluster:
        run = cluster.submit("shipsum", "0", "200000", "2", ship=directory)
        assert run.result(timeout=180) == expected(0, 200000, 3)
    # The other machine had no such plugin: its peers fetched the code and took part.
    wait_for(lambda: "plugins shipsum" in m2.log.read_text())
    # The command line ships the same way; the version is cached: nothing is vetted again.
    proc = client(
        keys,
        m1.first,
        "submit",
        "shipsum",
        "0",
        "5000",
        "--ship",
        str(directory),
        "--wait",
        "--json",
        "--as",
        "shipper",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"] == expected(0, 5000, 3)


def test_an_iterative_plugin_ships_and_its_workers_fetch_it_as_the_program(
    system: tuple[Path, list[Daemon]], tmp_path: Path
) -> None:
    # Issue 34, point 3: the paper's program transfer on daemons. The built-in kmeans under
    # another name, so that no peer has it installed.
    keys, daemons = system
    directory = tmp_path / "kmeansx"
    directory.mkdir()
    source = (PLUGINS / "kmeans.py").read_text()
    assert source.count('    "kmeans",\n') == 1
    (directory / "kmeansx.py").write_text(source.replace('    "kmeans",\n', '    "kmeansx",\n'))
    (directory / "_args.py").write_text((PLUGINS / "_args.py").read_text())
    argv = ["submit", "kmeansx", "20000", "8", "16", "1", "6", "--ship", str(directory)]

    def submitted() -> dict[str, Any]:
        proc = client(keys, daemons[0].first, *argv, "--wait", "--json", "--as", "shipper")
        assert proc.returncode == 0, proc.stderr
        out: dict[str, Any] = json.loads(proc.stdout)
        assert out["check"] == "ok"
        return out

    # The master schedules while the three workers fetch the code: a task that came first
    # waited for it there, and the scheduler counted each worker's fetch.
    first = submitted()
    assert 1 <= first["stats"]["program_transfers"] <= 3, first["stats"]
    assert "shipped code now" in daemons[0].log.read_text()
    # The same version again: every worker has it now, nothing is transferred.
    again = submitted()
    assert again["stats"]["program_transfers"] == 0, again["stats"]


def test_shipping_is_refused_without_the_grant(
    system: tuple[Path, list[Daemon]], tmp_path: Path
) -> None:
    keys, daemons = system
    directory = plugin_dir(tmp_path, 5)
    with satind.connect(daemons[0].first, keys, name="plain") as cluster:
        with pytest.raises(satind.NotAllowed, match=r"'ship' grant.*--may-ship"):
            cluster.submit("shipsum", "0", "10", ship=directory)
        assert {p.state for p in cluster.peers()} == {"alive"}  # nothing else lost


def test_peers_that_do_not_accept_shipped_code_refuse_it(
    system: tuple[Path, list[Daemon]], tmp_path: Path
) -> None:
    keys, _ = system
    lone = Daemon(keys, "lone", "c9", "", "--peers", "1")  # shipped defaults: not accepted
    try:
        with (
            satind.connect(lone.first, keys, name="shipper") as cluster,
            pytest.raises(satind.Refused, match="does not accept shipped code"),
        ):
            cluster.submit("shipsum", "0", "10", ship=plugin_dir(tmp_path, 7))
    finally:
        lone.kill()


def test_two_versions_of_one_plugin_never_mix(
    system: tuple[Path, list[Daemon]], tmp_path: Path
) -> None:
    keys, daemons = system
    one, two = plugin_dir(tmp_path, 1), plugin_dir(tmp_path, 2)
    with satind.connect(daemons[0].first, keys, name="shipper") as cluster:
        first = cluster.submit("shipsum", "0", "100000", "1", ship=one)
        second = cluster.submit("shipsum", "0", "100000", "1", ship=two)
        assert first.result(timeout=180) == expected(0, 100000, 1)
        assert second.result(timeout=180) == expected(0, 100000, 2)


# A plugin that registers a type, as docs/client.md's sumrange does: its jobs' arguments are
# Spans, stolen between peers; a Span of another version would be another class.
SPANNED = '''"""spansum LO HI: the sum of WEIGHT * i for LO <= i < HI, ranges carried as Spans."""

from dataclasses import dataclass

import satind

WEIGHT = {weight}


@dataclass(frozen=True)
class Span:
    lo: int
    hi: int


satind.register_type(Span, 41777, lambda s: [s.lo, s.hi], lambda v: Span(*v))


@satind.spawnable
def total(span: Span) -> int:
    if type(span) is not Span:  # another version's class: the versions mixed
        raise TypeError(f"a Span of {{type(span).__module__}} reached version {{WEIGHT}}")
    if span.hi - span.lo <= 500:
        return WEIGHT * sum(range(span.lo, span.hi))
    mid = (span.lo + span.hi) // 2
    a = total.spawn(Span(span.lo, mid))
    b = total.spawn(Span(mid, span.hi))
    satind.sync()
    return a.result() + b.result()


PLUGIN = satind.Plugin(
    name="spansum",
    entry=total,
    usage="spansum LO HI",
    parse=lambda argv: (Span(int(argv[0]), int(argv[1])),),
    max_branching=2,
)
'''


def test_an_edited_plugin_that_registers_a_type_ships_again_and_never_mixes(
    system: tuple[Path, list[Daemon]], tmp_path: Path
) -> None:
    keys, daemons = system
    versions = {}
    for weight in (5, 6, 7):
        versions[weight] = tmp_path / f"spanned{weight}"
        versions[weight].mkdir()
        (versions[weight] / "spansum.py").write_text(SPANNED.format(weight=weight))
    with satind.connect(daemons[0].first, keys, name="shipper") as cluster:
        # Shipped, edited, shipped again: each version registers its own Span under tag 41777.
        first = cluster.submit("spansum", "0", "50000", ship=versions[5])
        assert first.result(timeout=180) == expected(0, 50000, 5)
        # Two more versions at once: every Span a job receives is its own version's.
        runs = {w: cluster.submit("spansum", "0", "100000", ship=versions[w]) for w in (6, 7)}
        for weight, run in runs.items():
            assert run.result(timeout=180) == expected(0, 100000, weight)


def test_a_module_of_functions_without_plugin_ships_as_a_plugin_by_itself(
    system: tuple[Path, list[Daemon]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys, daemons = system
    (tmp_path / "cubes.py").write_text(
        "import satind\n\n\n"
        "@satind.spawnable\n"
        "def cubes(lo: int, hi: int) -> int:\n"
        "    if hi - lo <= 100:\n"
        "        return sum(i ** 3 for i in range(lo, hi))\n"
        "    mid = (lo + hi) // 2\n"
        "    a, b = cubes.spawn(lo, mid), cubes.spawn(mid, hi)\n"
        "    satind.sync()\n"
        "    return a.result() + b.result()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cubes = importlib.import_module("cubes")
    try:
        with satind.connect(daemons[0].first, keys, name="shipper") as cluster:
            run = cluster.submit(cubes.cubes, 0, 20000, ship=True)
            assert run.result(timeout=180) == sum(i**3 for i in range(20000))
    finally:
        sys.modules.pop("cubes", None)


def test_a_member_joining_mid_run_fetches_the_code(
    system: tuple[Path, list[Daemon]], tmp_path: Path
) -> None:
    keys, daemons = system
    m1 = daemons[0]
    config = keys / "ship.toml"
    directory = plugin_dir(tmp_path, 4)
    with satind.connect(m1.first, keys, name="shipper") as cluster:
        # 2,000 leaves of 20 ms: about 10 s on four peers, long enough to join in the middle.
        # Joined as soon as the run is under way: on a loaded machine a daemon's start and
        # the code's fetch took longer than the run's last 90% (1 run in 3 beside two hogs).
        run = cluster.submit("shipsum", "0", "2000000", "20", ship=directory)
        wait_for(lambda: run.progress() > 0.01, limit=60)
        daemons.append(Daemon(keys, "m3", "c0", m1.first, "--config", str(config)))
        m3 = daemons[-1]
        assert run.result(timeout=240) == expected(0, 2000000, 4)
    log = m3.log.read_text()
    assert "fetching its shipped code" in log and "plugins shipsum" in log, log[-3000:]
    ran = {p["slot"]: p["jobs_run"] for p in status(keys, m1.first)["peers"]}
    assert ran.get("m3/0", 0) + ran.get("m3/1", 0) > 0, ran


def test_a_member_that_does_not_accept_shipped_code_takes_no_part(
    system: tuple[Path, list[Daemon]], tmp_path: Path
) -> None:
    keys, daemons = system
    m1 = daemons[0]
    nay = Daemon(keys, "nay", "c0", m1.first)  # the shipped defaults: accept_shipped off
    daemons.append(nay)
    wait_for(
        lambda: (
            sum(
                p["state"] == "alive" and p["slot"].startswith("nay/")
                for p in status(keys, m1.first)["peers"]
            )
            == 2
        )
    )
    with satind.connect(m1.first, keys, name="shipper") as cluster:
        run = cluster.submit("shipsum", "0", "600000", "20", ship=plugin_dir(tmp_path, 6))

        def saying() -> list[str]:
            peers = status(keys, m1.first)["peers"]
            return [x for p in peers if p["slot"].startswith("nay/") for x in p["not_serving"]]

        wait_for(lambda: len(saying()) == 2, limit=60)
        assert all("does not accept shipped code" in line for line in saying())
        assert run.result(timeout=240) == expected(0, 600000, 6)
    assert "plugins shipsum" not in nay.log.read_text()  # it never loaded the code
    ran = {p["slot"]: p["jobs_run"] for p in status(keys, m1.first)["peers"]}
    assert ran.get("nay/0", 0) + ran.get("nay/1", 0) == 0, ran
