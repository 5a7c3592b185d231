"""What a client may do (node/permissions.py), on a real daemon with the shipped defaults: a
client certificate issued with the default grant submits runs and reads and cancels its own,
and is refused, saying which grant it lacks, everything else; an operator's may do it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import satind
from tests.integration.test_daemon import Daemon, client, status, wait_for
from tests.integration.test_daemon import satind as satind_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Daemon]]:
    keys = tmp_path_factory.mktemp("keys")
    assert satind_cli("keys", "init", str(keys)).returncode == 0
    assert satind_cli("keys", "issue", str(keys), "m1").returncode == 0
    for name in ("alice", "bob"):
        issued = satind_cli("keys", "issue", str(keys), name, "--client")
        assert issued.returncode == 0 and "may submit)" in issued.stdout
    issued = satind_cli("keys", "issue", str(keys), "ops", "--client", "--may-operate")
    assert "may submit, operate)" in issued.stdout
    daemon = Daemon(keys, "m1", "c0")
    try:
        wait_for(lambda: len(status(keys, daemon.first)["peers"]) == 2)
        yield keys, daemon
    finally:
        daemon.kill()


def test_a_submitter_uses_its_own_runs_and_nothing_else(system: tuple[Path, Daemon]) -> None:
    keys, m1 = system
    with (
        satind.connect(m1.first, keys, name="alice") as alice,
        satind.connect(m1.first, keys, name="bob") as bob,
        satind.connect(m1.first, keys, name="ops") as ops,
    ):
        mine = alice.submit("fib", "25")
        assert mine.result(timeout=120) == 75025
        assert alice.get_run(mine.id).outcome().check == "ok"
        list(mine.logs())  # reading its own logs is allowed (no NotAllowed)

        # Another submitter may neither read nor cancel it.
        theirs = bob.get_run(mine.id)
        with pytest.raises(satind.NotAllowed, match="submitted by alice"):
            theirs.result()
        with pytest.raises(satind.NotAllowed, match="'operate' grant"):
            list(theirs.logs())
        long = alice.submit("fib", "60")  # minutes of work
        with pytest.raises(satind.NotAllowed, match="only about its own runs"):
            bob.get_run(long.id).cancel()
        assert long.status() in ("queued", "running")

        # Nor drain peers; the refusal costs it nothing else.
        with pytest.raises(satind.NotAllowed, match=r"'operate' grant.*--may-operate"):
            bob.drain("m1/1")
        assert {p.state for p in bob.peers()} == {"alive"}

        # An operator may cancel anyone's run.
        ops.get_run(long.id).cancel()
        with pytest.raises(satind.RunCancelled):
            long.result(timeout=60)


def test_the_command_line_says_what_grant_a_request_takes(system: tuple[Path, Daemon]) -> None:
    keys, m1 = system
    refused = client(keys, m1.first, "drain", "m1/1", "--as", "bob")
    assert refused.returncode == 2
    assert "not allowed" in refused.stderr and "--may-operate" in refused.stderr
    assert client(keys, m1.first, "stop", "--as", "alice").returncode == 2
    # The daemon is still up and serves every client.
    assert len(status(keys, m1.first)["peers"]) == 2
    submitted = client(keys, m1.first, "submit", "fib", "20", "--wait", "--json", "--as", "bob")
    assert submitted.returncode == 0, submitted.stderr


def test_a_waiting_script_sees_a_progress_bar(
    system: tuple[Path, Daemon], capsys: pytest.CaptureFixture[str]
) -> None:
    keys, m1 = system
    with satind.connect(m1.first, keys, name="alice") as alice:
        run = alice.submit("fib", "27")
        assert run.result(timeout=120, progress=True) == 196418
    err = capsys.readouterr().err
    assert f"run {run.id}" in err and "100%" in err, err
