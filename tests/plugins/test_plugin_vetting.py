"""Which files of a plugin directory are plugins (read, never run), and vetting: each plugin
module imported first in a process of its own, so that whatever it does at import costs that
module only. The processes involved are short-lived vetting processes, not peers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from satind import plugin as plugins
from satind import vetting
from satind.config import DEFAULT, PluginsConfig
from satind.net.transport import Address
from satind.ops import launcher
from satind.plugin import loading as plugin_loading
from tests.integration.procs import alive, children_of, kill_all

FAST = PluginsConfig(import_timeout_s=1.0)


def plugin_source(name: str, prologue: str = "") -> str:
    return (
        prologue + "from satind import Plugin, spawnable\n"
        "@spawnable\n"
        f"def {name}_entry(x: int) -> int:\n"
        "    return x + 1\n"
        f"PLUGIN = Plugin(name={name!r}, entry={name}_entry, usage='{name} X',\n"
        "                parse=lambda argv: (int(argv[0]),))\n"
    )


def test_plugin_files_are_found_by_reading_them(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    run_marker = f"open({str(marker)!r}, 'a').write('x')\n"
    files = {
        "plain.py": "PLUGIN = 1\n",
        "suffixed.py": "PLUGIN_FAST: object = 1\n",
        "unpacked.py": "PLUGIN_A, PLUGIN_B = 1, 2\n",
        "helper.py": run_marker + "import sys\nsys.exit(3)\n",
        "nested.py": "def f():\n    PLUGIN = 1\nif True:\n    PLUGIN = 2\n",
        "almost.py": "PLUGINS = [1]\nMY_PLUGIN = 2\n",
        "misnamed.py": "from satind import Plugin\nFIB = Plugin(1, 2, 3, 4)\n",
        "broken.py": "PLUGIN = (\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deeper.py").write_text("PLUGIN = 1\n")
    found, problems = plugins.plugin_files(tmp_path)
    assert [f.name for f in found] == ["plain.py", "suffixed.py", "unpacked.py"]
    assert len(problems) == 2
    assert problems[0].startswith(f"{tmp_path / 'broken.py'}: cannot be read as Python")
    assert problems[1].startswith(f"{tmp_path / 'misnamed.py'}: not loaded: it makes a plugin")
    assert "calls it FIB" in problems[1]
    assert not marker.exists()


def test_whatever_a_module_does_at_import_costs_that_module_only(tmp_path: Path) -> None:
    prologues = {
        "a_good": "",
        "b_prints": "print('hello')\n",
        "c_exits": "import sys\nsys.exit(3)\n",
        "d_raises": "raise ValueError('no')\n",
        "e_dies": "import os\nos._exit(4)\n",
        "f_loops": "while True:\n    pass\n",
        "g_spams": "import os, sys\nsys.stderr.write('x' * 10**6)\nos.write(1, b'y' * 10**5)\n",
        "h_closes": "import os\nos.closerange(3, 64)\nos._exit(0)\n",
        "i_reads": "import sys\nassert sys.stdin.read() == ''\n",
        "j_good": "",
    }
    units = []
    for name, prologue in prologues.items():
        (tmp_path / f"{name}.py").write_text(plugin_source(name, prologue))
        units.append(vetting.Unit("file", str(tmp_path / f"{name}.py")))
    units.append(vetting.Unit("module", "satind_plugins.fib:PLUGIN"))
    units.append(vetting.Unit("module", "no_such_module_here"))
    started = time.monotonic()
    verdicts = vetting.vet(units, 1.0, 30.0)
    took = time.monotonic() - started
    said = {u.target.rsplit("/", 1)[-1].removesuffix(".py"): why for u, why in verdicts.items()}
    assert said["a_good"] == said["b_prints"] == said["g_spams"] == said["i_reads"] == ""
    assert said["j_good"] == said["satind_plugins.fib:PLUGIN"] == ""
    assert said["c_exits"].startswith("called sys.exit(3) at ")
    assert said["d_raises"].startswith("raised ValueError: no at ")
    assert said["e_dies"] == "its process exited with code 4 while importing it"
    assert said["f_loops"] == "did not finish importing it within 1 s (plugins.import_timeout_s)"
    assert said["h_closes"].startswith("its process exited with code ")
    assert "ModuleNotFoundError" in said["no_such_module_here"]
    assert took < 20  # one loop costs its time limit once, and nothing else waits for it


def test_a_module_that_allocates_past_the_bound_is_refused_and_the_others_load(
    tmp_path: Path,
) -> None:
    """An import that takes gigabytes (5 GiB were seen held by one shipped module's vetting)
    fails with MemoryError in the vetting process, whose address space is bounded."""
    (tmp_path / "a_hog.py").write_text(plugin_source("a_hog", "HELD = bytearray(5 * 2**30)\n"))
    (tmp_path / "b_good.py").write_text(plugin_source("b_good"))
    units = [vetting.Unit("file", str(tmp_path / f"{n}.py")) for n in ("a_hog", "b_good")]
    assert DEFAULT.plugins.vet_memory_mb == 4096
    verdicts = vetting.vet(units, 10.0, 30.0, DEFAULT.plugins.vet_memory_mb)
    hog, good = (verdicts[u] for u in units)
    assert hog.startswith("raised MemoryError") and "[plugins] vet_memory_mb" in hog, hog
    assert good == ""


def test_load_imports_only_what_came_through_and_reuses_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "okay.py").write_text(plugin_source("okay", "print('at import')\n"))
    (tmp_path / "bad.py").write_text(plugin_source("bad", "import os\nos._exit(5)\n"))
    (tmp_path / "notmine.py").write_text("from satind_plugins.fib import PLUGIN\n")
    found = plugins.load([tmp_path], FAST)
    assert "okay" in found.plugins and "bad" not in found.plugins
    assert found.plugins["okay"].entry(1) == 2
    assert found.failures == [
        f"{tmp_path / 'bad.py'}: not loaded: its process exited with code 5 while importing it",
        f"{tmp_path / 'notmine.py'}: not loaded: it names PLUGIN at its top level but defines "
        "no Plugin of its own (one whose entry function is defined in it)",
    ]

    # Handed the verdicts for the same code, a process vets nothing again...
    def no_vetting(*args: Any) -> dict[vetting.Unit, str]:
        raise AssertionError("vetted again")

    monkeypatch.setattr(plugin_loading, "vet", no_vetting)
    same = plugins.load([tmp_path], FAST, found.verdicts)
    assert same.plugins.keys() == found.plugins.keys()
    assert same.verdicts == found.verdicts and same.failures == found.failures
    monkeypatch.undo()
    # ... and a changed file (any file of the directory: helpers count) is vetted anew.
    (tmp_path / "bad.py").write_text(plugin_source("bad"))
    changed = plugins.load([tmp_path], FAST, found.verdicts)
    assert "bad" in changed.plugins and changed.plugins["bad"].entry(1) == 2


def test_a_vetting_process_ends_with_the_process_that_started_it(tmp_path: Path) -> None:
    (tmp_path / "loops.py").write_text(plugin_source("loops", "while True:\n    pass\n"))
    code = (
        "from satind import vetting\n"
        f"vetting.vet([vetting.Unit('file', {str(tmp_path / 'loops.py')!r})], 600.0, 600.0)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    vetters: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while not vetters and time.monotonic() < deadline:
            vetters = children_of(parent.pid)
            time.sleep(0.05)
        assert vetters, "no vetting process"
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while alive(vetters[0]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(vetters[0])
    finally:
        parent.kill()
        kill_all(vetters)


async def test_a_launcher_takes_nothing_but_reports_from_its_report_pipe() -> None:
    read_end, write_end = os.pipe()
    spec = launcher.PeerSpec("x/0", "c0", Address("127.0.0.1", 0), DEFAULT, None)

    class Process:
        pid = 1

        async def wait(self) -> int:
            return 0

    peer = launcher.PeerProcess(
        spec,
        Process(),  # type: ignore[arg-type]
        trio.lowlevel.FdStream(os.dup(write_end)),
        trio.lowlevel.FdStream(read_end),
    )
    os.write(write_end, b"hello from a plugin\n")
    with pytest.raises(launcher.StartupError, match="not a report"):
        await launcher.wait_bound(peer)
    os.write(write_end, b'{"name": "x/0"}\n')
    with pytest.raises(launcher.StartupError, match="reported no address"):
        await launcher.wait_bound(peer)
    os.close(write_end)
    await peer.aclose()
