"""docs/client.md, run as written: its files are written to a directory two daemons (shipped
defaults, two peers each, accepting shipped code) take as their plugin path, and each of its
examples runs as a script there, with $SATIND_TO and $SATIND_KEYS pointing at the daemons, as
the page says, and $SATIND_CONFIG naming a client certificate with every grant; its scripts
(the Executor's) run as `python SCRIPT` in a directory of their own."""

from __future__ import annotations

import difflib
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

# A block of the page: "<!-- file: NAME -->", "<!-- script: DIR/NAME -->" or "<!-- run -->",
# then a ```python block.
BLOCK = re.compile(
    r"<!-- (file: (?P<name>[\w.]+)|script: (?P<script>[\w./]+)|run) -->\n"
    r"```python\n(?P<code>.*?)```",
    re.S,
)


def blocks() -> tuple[dict[str, str], dict[str, str], list[str]]:
    files: dict[str, str] = {}
    scripts: dict[str, str] = {}
    runs: list[str] = []
    for found in BLOCK.finditer(PAGE.read_text()):
        if found.group("name"):
            files[found.group("name")] = found.group("code")
        elif found.group("script"):
            scripts[found.group("script")] = found.group("code")
        else:
            runs.append(found.group("code"))
    return files, scripts, runs


FILES, SCRIPTS, RUNS = blocks()

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
    assert len(re.findall(r"```python", PAGE.read_text())) == len(FILES) + len(SCRIPTS) + len(RUNS)
    assert "sumrange.py" in FILES and "primes/primes.py" in SCRIPTS and len(RUNS) >= 7


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Daemon]]:
    keys = tmp_path_factory.mktemp("keys")
    work = tmp_path_factory.mktemp("work")
    for name, code in FILES.items():
        (work / name).write_text(code)
    assert satind("keys", "init", str(keys)).returncode == 0
    for name in ("m1", "m2"):
        assert satind("keys", "issue", str(keys), name).returncode == 0
    grants = ("--client", "--may-operate", "--may-ship")
    assert satind("keys", "issue", str(keys), "scientist", *grants).returncode == 0
    (keys / "client.toml").write_text('[client]\nname = "scientist"\n')
    started: list[Daemon] = []
    try:
        path = ("--plugin-path", str(work), "--accept-shipped")
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
    proc = subprocess.run(
        [sys.executable, "-c", RUNS[index]],
        cwd=work,
        env=_env(m1, work),
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


def _env(m1: Daemon, work: Path) -> dict[str, str]:
    keys = m1.log.parent
    config = str(keys / "client.toml")
    return dict(
        os.environ,
        SATIND_TO=m1.first,
        SATIND_KEYS=str(keys),
        SATIND_CONFIG=config,
        PYTHONPATH=str(work),
    )


# The example of Python's documentation for ProcessPoolExecutor (concurrent.futures, "ProcessPool
# Executor Example"), as it is there: the page's version may differ by its executor's line
# and `import satind` only.
PROCESS_POOL_EXAMPLE = """import concurrent.futures
import math

PRIMES = [
    112272535095293,
    112582705942171,
    112272535095293,
    115280095190773,
    115797848077099,
    1099726899285419]

def is_prime(n):
    if n < 2:
        return False
    if n == 2:
        return True
    if n % 2 == 0:
        return False

    sqrt_n = int(math.floor(math.sqrt(n)))
    for i in range(3, sqrt_n + 1, 2):
        if n % i == 0:
            return False
    return True

def main():
    with concurrent.futures.ProcessPoolExecutor() as executor:
        for number, prime in zip(PRIMES, executor.map(is_prime, PRIMES)):
            print('%d is prime: %s' % (number, prime))

if __name__ == '__main__':
    main()
"""
PRIMES_OUTPUT = """112272535095293 is prime: True
112582705942171 is prime: True
112272535095293 is prime: True
115280095190773 is prime: True
115797848077099 is prime: True
1099726899285419 is prime: False
"""


def test_the_executor_example_is_the_process_pool_example_but_for_one_line() -> None:
    diff = [
        line
        for line in difflib.ndiff(
            PROCESS_POOL_EXAMPLE.splitlines(), SCRIPTS["primes/primes.py"].splitlines()
        )
        if line[:1] in "+-"
    ]
    assert diff == [
        "+ import satind",
        "-     with concurrent.futures.ProcessPoolExecutor() as executor:",
        "+     with satind.Executor() as executor:",
    ]


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_script_runs_as_written(system: tuple[Path, Daemon], tmp_path: Path, name: str) -> None:
    work, m1 = system
    script = tmp_path / name
    script.parent.mkdir(parents=True)
    script.write_text(SCRIPTS[name])
    proc = subprocess.run(
        [sys.executable, script.name],
        cwd=script.parent,
        env=_env(m1, work),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == PRIMES_OUTPUT


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
