"""A partial crash with checkpoints on, with real daemons (issue 31): machine m2 is SIGKILLed
mid-run — its daemon and every peer, so nothing restarts them — and the peers of m1 reuse
what m2's peers had logged, read from the checkpoint directory both machines share, or from
the copies m1 kept when each machine logs to a directory of its own. Shipped defaults but for
the checkpoint settings; the answer is exact and ``results_from_logs`` says what came back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import independent
from tests.integration.procs import free_ports
from tests.integration.test_daemon import Daemon, client_in_background, status, wait_for

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("where", ["shared", "copies"])
def test_survivors_reuse_what_a_crashed_machine_logged(
    keys: Path, tmp_path: Path, where: str
) -> None:
    def opts(machine: str) -> list[str]:
        directory = tmp_path / ("ckpt" if where == "shared" else f"ckpt-{machine}")
        return ["--checkpoint-dir", str(directory), "--config", str(config)]

    config = tmp_path / "sel.toml"
    # Every completion logged as it happens; no copies on a shared directory (every peer
    # reads every log there).
    copies = 0 if where == "shared" else 1
    config.write_text(f'[checkpoint]\npolicy = "sel"\ncopies = {copies}\n')
    m1 = Daemon(keys, "m1", "east", "", *opts("m1"), listen=f"127.0.0.1:{free_ports(2)}")
    m2: Daemon | None = None
    try:
        m2 = Daemon(keys, "m2", "west", m1.first, *opts("m2"), listen=f"127.0.0.1:{free_ports(2)}")
        wait_for(lambda: sum(p["state"] == "alive" for p in status(keys, m1.first)["peers"]) == 4)
        # 512 leaves of 40 ms, about 5 s on 4 peers; the master is m1's first peer.
        argv = ["submit", "tree", "3", "8", "40", "sleep", "--wait", "--json"]
        submit = client_in_background(keys, m1.first, *argv)
        try:
            wait_for(lambda: any(r["progress"] > 0.4 for r in status(keys, m1.first)["runs"]), 60)
            # And m1 can read what each of m2's peers logged (in the shared directory, or in
            # the copies m1's peers keep): killed before that, nothing could come back.
            wait_for(lambda: all(logged_for_m1(tmp_path, where, p) for p in ("m2_0", "m2_1")))
            m2.kill()  # the whole machine: nothing restarts its peers
            out, err = submit.communicate(timeout=120)
        finally:
            submit.kill()
        assert submit.returncode == 0, err
        report = json.loads(out)
        assert report["result"] == independent.tree(3, 8) and report["check"] == "ok"
        stats = report["stats"]
        assert stats["jobs_restarted"] > 0
        # What m1's peers restarted and read, to tell a failure's cause from the test's log.
        said = [
            line for line in m1.log.read_text().splitlines() if "restart" in line or "log (" in line
        ]
        assert stats["results_from_logs"] > 0, (stats, said)
        if where == "copies":
            assert stats["checkpoint_bytes_copied"] > 0
    finally:
        if m2 is not None:
            m2.kill()
        m1.kill()


def logged_for_m1(tmp_path: Path, where: str, peer: str) -> bool:
    """Whether some records of ``peer``'s log (file name NODE_INDEX) are where m1 reads them."""
    if where == "shared":
        paths = [tmp_path / "ckpt" / f"{peer}.satlog"]
    else:
        paths = list((tmp_path / "ckpt-m1" / "copies").glob(f"*/{peer}.satlog"))
    return any(path.exists() and path.stat().st_size > 0 for path in paths)
