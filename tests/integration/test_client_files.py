"""A run's arguments are data from a client (issue 28, point 8). From a client certificate,
against a real daemon of two peers whose operator allowed one input directory:

- a file a run's arguments name is read on the peers only inside that directory (no "..",
  no symlink, no FIFO or device, size-capped); any other is asked of the client, which sends
  its own copy — so a peer never reads, echoes or chokes on its own files (`sat
  /some/secret.cnf`, `sat /dev/zero`, `sat /dev/stdin`);
- a run's output files go to the submitter with the result (the CLI writes them where it
  runs), never onto the master's disk (`heat2d ... --png /some/victim.txt`);
- parsing is bounded in time and in concurrency per client certificate: a client whose
  parses are stuck gets answers, another client is served, and `satind stop --all` stops
  every peer all the same.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import trio

from satind import config
from satind.client import client as remote
from satind.net import tls
from satind.net.transport import parse_address
from satind.plugin import PluginFailed, UsageError
from tests.integration.procs import alive, children_of
from tests.integration.test_daemon import Daemon, satind, status, wait_for

pytestmark = pytest.mark.slow
PARSING = Path(__file__).parent.parent / "data" / "parsing"
PNG = b"\x89PNG\r\n\x1a\n"
SECRET = "c the operator's\np cnf 2 1\nTOPSECRET-LINE-42 0\n"
# A formula with one model: 1 true, 2 false.
GOOD_CNF = "p cnf 2 2\n1 0\n-2 0\n"

CONFIG = """
[run]
parse_timeout_s = 2.0
parses_per_client = 2

[files]
input_dir = "{inputs}"
"""


@dataclass
class System:
    keys: Path
    daemon: Daemon
    tmp: Path
    inputs: Path
    home: Path  # the daemon's working directory

    @property
    def to(self) -> str:
        return self.daemon.first

    def command(self, command: str, *args: str) -> list[str]:
        # The options first: a plugin's own options come after "--", at the end.
        options = ["--to", self.to, "--keys", str(self.keys)]
        return [sys.executable, "-m", "satind", command, *options, *args]

    def cli(
        self, *args: str, cwd: Path, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args), capture_output=True, text=True, timeout=60, cwd=cwd, input=stdin
        )

    async def cli_async(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
        with trio.fail_after(60):
            return await trio.run_process(
                self.command(*args), capture_stdout=True, capture_stderr=True, check=False, cwd=cwd
            )

    def rss_mb(self) -> float:
        total = 0.0
        for pid in children_of(self.daemon.proc.pid):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        return total


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    tmp = tmp_path_factory.mktemp("files")
    keys = tmp / "keys"
    assert satind("keys", "init", str(keys)).returncode == 0
    assert satind("keys", "issue", str(keys), "m1").returncode == 0
    assert satind("keys", "issue", str(keys), "bob", "--client").returncode == 0
    inputs, home = tmp / "inputs", tmp / "home"
    inputs.mkdir()
    home.mkdir()
    (tmp / "secret.cnf").write_text(SECRET)
    (inputs / "good.cnf").write_text(GOOD_CNF)
    (inputs / "sub").mkdir()
    (inputs / "sub" / "good.cnf").write_text(GOOD_CNF)
    (inputs / "link.cnf").symlink_to(tmp / "secret.cnf")
    (inputs / "up").symlink_to(tmp)
    os.mkfifo(inputs / "fifo.cnf")
    cfg = keys / "files.toml"
    cfg.write_text(CONFIG.format(inputs=inputs))
    daemon = Daemon(
        keys, "m1", "east", "", "--plugin-path", str(PARSING), "--config", str(cfg), cwd=home
    )
    try:
        wait_for(
            lambda: (
                len([p for p in status(keys, daemon.first)["peers"] if p["state"] == "alive"]) == 2
            )
        )
        yield System(keys, daemon, tmp, inputs, home)
    finally:
        daemon.kill()


def _client_cfg() -> config.Config:
    # Waits long enough that a slow answer shows as slow (the tests time it), not as a
    # client-side timeout.
    return replace(config.DEFAULT, client=replace(config.DEFAULT.client, timeout_s=60.0))


async def _submit(system: System, plugin: str, *argv: str, who: str = "client") -> str:
    """A submission by a client that sends no file (a hostile one, or one on a machine
    without the file): the run id, or the refusal's message."""
    creds = tls.Credentials.load(system.keys, who, tls.ROLE_CLIENT)
    cfg = _client_cfg()
    async with remote.connect(parse_address(system.to), cfg, creds) as client:
        try:
            return await client.submit(plugin, list(argv))
        except (remote.SubmitRefused, PluginFailed, UsageError) as exc:
            return f"refused: {exc}"


async def test_a_file_a_client_names_is_read_only_inside_the_operators_input_dir(
    system: System,
) -> None:
    secret = system.tmp / "secret.cnf"
    with trio.fail_after(30):
        for name in (
            str(secret),  # absolute, outside the input directory
            "../secret.cnf",  # out of it by ".."
            "link.cnf",  # a symlink inside it to a file outside
            "up/secret.cnf",  # through a symlinked directory
            f"{system.inputs}/../secret.cnf",
        ):
            answer = await _submit(system, "sat", name)
            assert answer.startswith("refused"), (name, answer)
            assert "TOPSECRET" not in answer, (name, answer)
            # The peer asks the client for the file instead.
            assert "from the client" in answer, (name, answer)
        # A FIFO or a device in the directory is refused at once, not waited on.
        answer = await _submit(system, "sat", "fifo.cnf")
        assert answer.startswith("refused") and "not a regular file" in answer, answer
    # What the operator put there is read, by a relative name or an absolute one inside.
    with trio.fail_after(30):
        for name in ("good.cnf", "sub/good.cnf", str(system.inputs / "good.cnf")):
            answer = await _submit(system, "sat", name)
            assert not answer.startswith("refused"), (name, answer)


async def test_dev_zero_and_dev_stdin_are_refused_at_once_and_memory_stays_bounded(
    system: System,
) -> None:
    before = system.rss_mb()
    started = time.monotonic()
    with trio.fail_after(30):
        answer = await _submit(system, "sat", "/dev/zero")
        assert answer.startswith("refused") and "from the client" in answer, answer
        # 45 at once on one connection: each answered, none holds a thread.
        answers: list[str] = []
        creds = tls.Credentials.load(system.keys, "client", tls.ROLE_CLIENT)
        async with remote.connect(parse_address(system.to), _client_cfg(), creds) as client:

            async def one() -> None:
                try:
                    answers.append(await client.submit("sat", ["/dev/stdin"]))
                except remote.SubmitRefused as exc:
                    answers.append(f"refused: {exc}")

            async with trio.open_nursery() as nursery:
                for _ in range(45):
                    nursery.start_soon(one)
        assert len(answers) == 45 and all("from the client" in a for a in answers), answers[:3]
    assert time.monotonic() - started < 20
    assert system.rss_mb() - before < 64, (before, system.rss_mb())
    # The CLI reads the user's own /dev/zero, up to files.max_input_bytes, and says so.
    proc = await system.cli_async("submit", "sat", "/dev/zero", cwd=system.tmp)
    assert proc.returncode == 2 and b"files.max_input_bytes" in proc.stderr, proc.stderr


async def test_an_output_file_goes_to_the_submitter_not_onto_the_masters_disk(
    system: System,
) -> None:
    victim = system.tmp / "victim.txt"
    victim.write_text("precious")
    creds = tls.Credentials.load(system.keys, "client", tls.ROLE_CLIENT)
    with trio.fail_after(60):
        async with remote.connect(parse_address(system.to), _client_cfg(), creds) as client:
            run_id = await client.submit("heat2d", ["3", "3", "0", "1", "--png", str(victim)])
            result = await client.result(run_id)
    assert victim.read_text() == "precious"
    assert result.error is None and result.check == "ok"
    # The picture travelled to the client, which writes it (or not) where it is.
    assert result.outputs[str(victim)].startswith(PNG)
    # The CLI writes it in its own working directory; nothing lands in the daemon's.
    client_dir = system.tmp / "client-cwd"
    client_dir.mkdir()
    proc = await system.cli_async(
        *("submit", "heat2d", "6", "5", "3", "2", "--wait", "--json", "--", "--png", "plate.png"),
        cwd=client_dir,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["check"] == "ok" and "plate.png" in out["outputs"]
    assert (client_dir / "plate.png").read_bytes().startswith(PNG)
    assert list(system.home.iterdir()) == []
    # Fetched later, from another directory: written only where the user says.
    later = system.tmp / "later"
    later.mkdir()
    proc = await system.cli_async(
        "result", out["run_id"], "--json", "--outputs", str(later / "pics"), cwd=later
    )
    assert proc.returncode == 0, proc.stderr
    assert "written to" in json.loads(proc.stdout)["outputs"]["plate.png"]
    assert sorted(p.name for p in later.rglob("*")) == ["pics", "plate.png"]


def test_the_cli_sends_the_users_own_input_file(system: System) -> None:
    client_dir = system.tmp / "client-own"
    client_dir.mkdir()
    (client_dir / "mine.cnf").write_text(GOOD_CNF)
    proc = system.cli("submit", "sat", "mine.cnf", "--wait", "--json", cwd=client_dir)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"] == {"sat": True, "model": [1, -2]}
    # From a pipe too: the client reads its stdin once and sends it.
    proc = system.cli(
        "submit", "sat", "/dev/stdin", "--wait", "--json", cwd=client_dir, stdin=GOOD_CNF
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"] == {"sat": True, "model": [1, -2]}


async def test_stuck_parses_cost_their_client_only_and_stop_still_works(system: System) -> None:
    # Client "client" submits four runs whose parse never returns (run.parses_per_client = 2,
    # run.parse_timeout_s = 2 s): each is answered within the time bound.
    answers: list[str] = []
    started = time.monotonic()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:

            async def stuck() -> None:
                answers.append(await _submit(system, "slowparse", "3600"))

            for _ in range(4):
                nursery.start_soon(stuck)
    assert time.monotonic() - started < 15
    assert len(answers) == 4 and all(a.startswith("refused") for a in answers), answers
    assert all("run.parse_timeout_s" in a for a in answers), answers
    # Two ran out of time; two waited for a slot all along.
    assert sum("did not finish" in a for a in answers) == 2, answers
    assert sum("submissions being parsed" in a for a in answers) == 2, answers
    # Its slots stay taken while its parses run on (a thread cannot be stopped) ...
    with trio.fail_after(30):
        answer = await _submit(system, "fib", "10")
    assert answer.startswith("refused") and "submissions being parsed" in answer, answer
    # ... and another client certificate is served as if nothing happened.
    proc = await system.cli_async(
        "submit", "fib", "20", "--wait", "--json", "--as", "bob", cwd=system.tmp
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"] == 6765
    # Stop: every peer exits, stuck parses and all.
    peers = children_of(system.daemon.proc.pid)
    stop = await system.cli_async("stop", "--all", cwd=system.tmp)
    assert stop.returncode == 0, stop.stderr
    assert system.daemon.proc.wait(timeout=30) == 0
    wait_for(lambda: not any(alive(p) for p in peers), 10)


def test_satind_run_reads_and_writes_the_users_own_files(tmp_path: Path) -> None:
    def run(*argv: str, stdin: str | None = None) -> dict[str, object]:
        proc = subprocess.run(
            [sys.executable, "-m", "satind", "run", *argv, "--peers", "1", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
            input=stdin,
        )
        assert proc.returncode == 0, proc.stderr
        out: dict[str, object] = json.loads(proc.stdout)
        return out

    (tmp_path / "mine.cnf").write_text(GOOD_CNF)
    assert run("sat", "mine.cnf")["result"] == {"sat": True, "model": [1, -2]}
    # A pipe: read once (the local check of the arguments, then sent as read).
    assert run("sat", "/dev/stdin", stdin=GOOD_CNF)["result"] == {"sat": True, "model": [1, -2]}
    out = run("raytracer", "16", "12", "pic.png")
    assert (tmp_path / "pic.png").read_bytes().startswith(PNG)
    assert out["outputs"] == {
        "pic.png": f"written ({(tmp_path / 'pic.png').stat().st_size:,} bytes)"
    }
