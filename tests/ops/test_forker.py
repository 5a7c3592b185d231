"""Peers forked from a template (ops/forker.py), with real processes: each is this launcher's
own child, named in its command line as an exec'd peer is, and its exit status is the one it
exits with; a peer that cannot run says so as an exec'd one does; when the template is gone,
peers are started as new interpreters and nothing else changes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from satind.config import Config
from satind.net.transport import Address
from satind.ops import forker
from satind.ops.launcher import (
    EXIT_PORT_BUSY,
    PEER_MODULES,
    PeerProcess,
    PeerSpec,
    PeerUsageError,
    ephemeral_keys,
    start_peer,
    stdout_for_peers,
    wait_bound,
)

pytestmark = pytest.mark.skipif(not forker.supported(), reason="forking peers needs Linux")


def _spec(name: str, port: int = 0) -> PeerSpec:
    return PeerSpec(
        name=name,
        cluster="c0",
        listen=Address("127.0.0.1", port),
        cfg=Config(),
        credentials=ephemeral_keys().node,
    )


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().split()


async def _stop(peer: PeerProcess) -> int:
    await peer.ask_to_stop(1.0)
    with trio.fail_after(20):
        code = await peer.process.wait()
    await peer.aclose()
    return code


async def test_a_forked_peer_is_our_child_named_as_an_execd_one_and_exits_as_it_says() -> None:
    async with forker.open_forker(True, stdout_for_peers(), PEER_MODULES, 30.0) as template:
        assert template is not None
        peers = [await start_peer(_spec(f"t/{i}"), template) for i in range(2)]
        for peer in peers:
            with trio.fail_after(30):
                await wait_bound(peer)
            assert isinstance(peer.process, forker.ForkedProcess)
            # Adopted: this process's child, as an exec'd peer is, not the template's.
            assert _parent(peer.process.pid) == os.getpid()
            argv = _cmdline(peer.process.pid)
            assert argv[argv.index("--name") + 1] == peer.name
            assert "satind.ops.child" in argv
        assert len({p.address for p in peers}) == 2
        # A clean stop exits 0; a SIGKILL is -9, as trio.Process says it.
        assert await _stop(peers[0]) == 0
        peers[1].process.kill()
        with trio.fail_after(20):
            assert await peers[1].process.wait() == -signal.SIGKILL
        await peers[1].aclose()
        assert peers[1].process.returncode == -signal.SIGKILL
        peers[1].process.kill()  # a process already reaped: nothing is signalled
    # The template is gone with its block.
    assert template.process.returncode is not None


async def test_a_forked_peer_that_cannot_listen_exits_as_an_execd_one_does() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with forker.open_forker(True, stdout_for_peers(), PEER_MODULES, 30.0) as template:
            peer = await start_peer(_spec("t/0", port), template)
            with trio.fail_after(30), pytest.raises(PeerUsageError, match="cannot listen"):
                await wait_bound(peer)
            assert isinstance(peer.process, forker.ForkedProcess)
            assert peer.process.returncode == EXIT_PORT_BUSY
            await peer.aclose()


async def test_without_the_template_peers_are_new_interpreters(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with forker.open_forker(True, stdout_for_peers(), PEER_MODULES, 30.0) as template:
        assert template is not None
        template.process.kill()
        await template.process.wait()
        peer = await start_peer(_spec("t/0"), template)
        assert isinstance(peer.process, trio.Process)
        assert "peers are started as new interpreters from now on" in caplog.text
        assert template.failed
        with trio.fail_after(30):
            await wait_bound(peer)
        assert await _stop(peer) == 0
    # Off by configuration: no template at all.
    async with forker.open_forker(False, stdout_for_peers(), PEER_MODULES, 30.0) as none:
        assert none is None


async def test_a_template_that_does_not_answer_is_killed_and_peers_are_execd() -> None:
    async with forker.open_forker(True, stdout_for_peers(), PEER_MODULES, 2.0) as template:
        assert template is not None
        os.kill(template.process.pid, signal.SIGSTOP)  # a template stuck for good
        peer = await start_peer(_spec("t/0"), template)
        assert isinstance(peer.process, trio.Process)
        assert "did not answer within 2 s" in template.failed
        with trio.fail_after(10):  # killed: no late fork with the same pipes
            assert await template.process.wait() == -signal.SIGKILL
        with trio.fail_after(30):
            await wait_bound(peer)
        assert await _stop(peer) == 0


def test_satind_run_with_forked_peers_says_nothing_an_execd_run_would_not() -> None:
    # The peers' stderr is the command's: a warning of the fork's (runpy's about a module
    # run that is imported already, once per peer) would be in every user's terminal.
    proc = subprocess.run(
        [sys.executable, "-m", "satind", "run", "nqueens", "9", "--peers", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
