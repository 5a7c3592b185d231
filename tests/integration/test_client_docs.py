"""docs/client.md, run as written: its files are written to a directory two daemons (shipped
defaults, two peers each) take as their plugin path, and each of its examples runs as a
script there, with $SATIND_TO and $SATIND_KEYS pointing at the daemons, as the page says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_daemon import Daemon, satind, status, wait_for

pytestmark = pytest.mark.slow
PAGE = Path(__file__).parent.parent.parent / "docs" / "client.md"

# A block of the page: "<!-- file: NAME -->" or "<!-- run -->", then a ```python block.
BLOCK = re.compile(r"<!-- (file: (?P<name>[\w.]+)|run) -->\n```python\n(?P<code>.*?)```", re.S)


def blocks() -> tuple[dict[str, str], list[str]]:
    files: dict[str, str] = {}
    runs: list[str] = []
    for found in BLOCK.finditer(PAGE.read_text()):
        if found.group("name"):
            files[found.group("name")] = found.group("code")
        else:
            runs.append(found.group("code"))
    return files, runs


FILES, RUNS = blocks()

# What an example must print besides exiting 0, by a line of its code: the examples that show
# an error catch it, and would pass silently if it were not raised.
PRINTS = {
    "except TooBig as exc:": ["the job raised TooBig(", "give LO and HI", "unknown plugin"],
    "except satind.RunCancelled as exc:": ["running ", "was cancelled"],
    "print(await run.result())": ["499999500000"],
    "print(satind.run_local(total, 0, 10**6, peers=2))": ["499999500000\n499500\n"],
}


def test_the_page_has_examples() -> None:
    # Every python block is one the tests write or run: none is left unchecked.
    assert len(re.findall(r"```python", PAGE.read_text())) == len(FILES) + len(RUNS)
    assert "sumrange.py" in FILES and len(RUNS) >= 6


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Daemon]]:
    keys = tmp_path_factory.mktemp("keys")
    work = tmp_path_factory.mktemp("work")
    for name, code in FILES.items():
        (work / name).write_text(code)
    assert satind("keys", "init", str(keys)).returncode == 0
    for name in ("m1", "m2"):
        assert satind("keys", "issue", str(keys), name).returncode == 0
    started: list[Daemon] = []
    try:
        path = ("--plugin-path", str(work))
        started.append(Daemon(keys, "m1", "c0", "", *path))
        started.append(Daemon(keys, "m2", "c0", started[0].first, *path))
        wait_for(lambda: len(status(keys, started[0].first)["peers"]) == 4)
        yield work, started[0]
    finally:
        for daemon in started:
            daemon.kill()


@pytest.mark.parametrize("index", range(len(RUNS)))
def test_example_runs_as_written(system: tuple[Path, Daemon], index: int) -> None:
    work, m1 = system
    keys = m1.log.parent
    env = dict(os.environ, SATIND_TO=m1.first, SATIND_KEYS=str(keys), PYTHONPATH=str(work))
    proc = subprocess.run(
        [sys.executable, "-c", RUNS[index]],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    why = f"example {index}:\n{RUNS[index]}\n{proc.stdout}\n{proc.stderr}"
    assert proc.returncode == 0, why
    for line, printed in PRINTS.items():
        if line in RUNS[index]:
            for text in printed:
                assert text in proc.stdout, why


def test_the_readmes_python_quickstart_runs_as_written(tmp_path: Path) -> None:
    readme = (PAGE.parent.parent / "README.md").read_text()
    code = next(
        block
        for block in re.findall(r"```python\n(.*?)```", readme, re.S)
        if "satind.run_local(" in block
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "14200\n75025\n"
