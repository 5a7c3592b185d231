"""configs/slurm/satind.sbatch, run for real on this machine under a fake Slurm: `srun` runs
its command once per "node" here, each node a loopback address (127.0.0.2, 127.0.0.3) that
is also its name. The script makes its keys, starts a daemon per node, waits until every
peer joined, runs a plugin, prints the result and stops the daemons; every satind command it
ran is checked with satind's parser."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from satind.cli.daemon import start_config
from tests.configs.commands import CONFIGS, check, expand, satind_commands
from tests.integration.procs import alive, free_ports

SCRIPT = CONFIGS / "slurm" / "satind.sbatch"
NODES = ["127.0.0.2", "127.0.0.3"]

SRUN = """#!/bin/bash
# A fake srun: the command once per node of $FAKE_NODES, here, with that node's variables.
while [[ "$1" == -* ]]; do shift; done
pids=()
for node in $FAKE_NODES; do
  SLURMD_NODENAME=$node "$@" &
  pids+=($!)
  echo $! >> "$FAKE_PIDS"
done
trap 'kill -TERM "${pids[@]}" 2>/dev/null' TERM INT
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
exit $status
"""
SCONTROL = """#!/bin/bash
# A fake scontrol: `show hostnames LIST` lists $FAKE_NODES.
[ "$1 $2" = "show hostnames" ] && printf '%s\\n' $FAKE_NODES
"""
SATIND = """#!/bin/bash
# satind, each command line written down first (fields split by 0x1f).
{ printf '%s\\x1f' "$@"; printf '\\n'; } >> "$SATIND_ARGV"
exec {real} "$@"
"""


def test_the_script_is_valid_bash() -> None:
    proc = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_every_satind_command_of_the_script_is_accepted() -> None:
    commands = satind_commands(SCRIPT.read_text())
    assert {argv[0] for argv in commands} == {"keys", "start", "ready", "submit", "stop"}
    # What the variables hold on a node (the run below checks the real values); "$@" is the
    # plugin and its arguments.
    env = {
        "SATIND_KEYS": "/shared/satind-keys-1",
        "SATIND_TO": "node1:7420",
        "SLURMD_NODENAME": "node2",
        "SLURM_JOB_ID": "1",
        "node": "node2",
        "members": "4",
        "0": "7420",
        "1": "2",
        "2": "20",
    }
    for argv in commands:
        words = [w for w in argv if w != "$@"] + (["fib", "25", "15"] if "$@" in argv else [])
        args = check(expand(words, env))
        if args.command == "start":
            assert (args.on_sigterm, args.drain_deadline) == ("drain", 20.0)
            start_config(args)  # the addresses and numbers are valid


@pytest.mark.slow
def test_the_script_runs_a_plugin_on_two_fake_nodes(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    real = Path(sys.executable).parent / "satind"
    for name, text in (
        ("srun", SRUN),
        ("scontrol", SCONTROL),
        ("satind", SATIND.replace("{real}", str(real))),
    ):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    argv_log, pids = tmp_path / "argv", tmp_path / "pids"
    env = {
        "PATH": f"{bin_dir}:{real.parent}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "FAKE_NODES": " ".join(NODES),
        "FAKE_PIDS": str(pids),
        "SATIND_ARGV": str(argv_log),
        "SLURM_JOB_NODELIST": "fake[1-2]",
        "SLURM_JOB_ID": "4242",
        "SLURM_SUBMIT_DIR": str(tmp_path),
        "SLURM_CPUS_ON_NODE": "2",
        "SATIND_PORT": str(free_ports(2)),
        "SATIND_READY_S": "60",
    }
    proc = subprocess.Popen(
        ["bash", str(SCRIPT), "fib", "25", "15"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the session this test started, by its id
            proc.wait()
    assert proc.returncode == 0, err
    assert "ready: 127.0.0.2/0 joined; 2 peers of 127.0.0.2 up; 4 members up" in out
    assert "75025" in out
    # Every daemon exited (stopped by the script), and the job's keys are gone.
    daemons = [int(p) for p in pids.read_text().split()]
    assert len(daemons) == 2 and not any(alive(pid) for pid in daemons)
    assert not (tmp_path / "satind-keys-4242").exists()
    ran = [line.split("\x1f")[:-1] for line in argv_log.read_text().splitlines()]
    assert {argv[0] for argv in ran} == {"keys", "start", "ready", "submit", "stop"}
    for argv in ran:
        check(argv)
