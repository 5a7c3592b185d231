"""configs/slurm/satind.sbatch, run for real on this machine under a fake Slurm: `srun` runs
its command once per "node" here. The script makes its keys, starts a daemon per node, waits
until every peer joined, runs a plugin, prints the result and stops the daemons; every satind
command it ran is checked with satind's parser.

The nodes are loopback addresses (127.0.0.2, 127.0.0.3), each also its name; as they share
this machine's interfaces, the fake satind listens at the node's own address where the script
says every interface (two daemons cannot both listen on 0.0.0.0 at one port). Where a testbed
can be made (root, pyroute2), the script also runs as it is, each node a testbed machine: a
network namespace with an address of its own."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from satind.cli.daemon import start_config
from satind.ops.advertise import unspecified
from satind.testbed.machines import ENTER
from satind.testbed.network import Network, pids_in, unavailable
from tests.configs.commands import CONFIGS, check, expand, satind_commands
from tests.integration.procs import alive, free_ports

SCRIPT = CONFIGS / "slurm" / "satind.sbatch"
NODES = ["127.0.0.2", "127.0.0.3"]

SRUN = """#!/bin/bash
# A fake srun: the command once per node of $FAKE_NODES, here, with that node's variables; in
# the node's network namespace when $FAKE_NETNS names one per node (entered by $FAKE_ENTER).
while [[ "$1" == -* ]]; do shift; done
read -r -a namespaces <<< "${FAKE_NETNS:-}"
pids=()
i=0
for node in $FAKE_NODES; do
  if [ -n "${FAKE_NETNS:-}" ]; then
    SLURMD_NODENAME=$node "$FAKE_PYTHON" "$FAKE_ENTER" "${namespaces[$i]}" -- "$@" &
  else
    SLURMD_NODENAME=$node "$@" &
  fi
  pids+=($!)
  echo $! >> "$FAKE_PIDS"
  i=$((i + 1))
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
# satind, each command line written down first (fields split by 0x1f), in one write: the
# nodes' commands run at once, and two writes each interleaved their lines (1 run in ~20).
# With $FAKE_LISTEN_AT_NODE, a listening address 0.0.0.0:PORT becomes the node's own.
line=$(printf '%s\\x1f' "$@")
printf '%s\\n' "$line" >> "$SATIND_ARGV"
args=()
for arg in "$@"; do
  if [ -n "${FAKE_LISTEN_AT_NODE:-}" ] && [[ "$arg" == 0.0.0.0:* ]]; then
    arg="$SLURMD_NODENAME:${arg#0.0.0.0:}"
  fi
  args+=("$arg")
done
exec {real} "${args[@]}"
"""


def test_the_script_is_valid_bash() -> None:
    proc = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_every_satind_command_of_the_script_is_accepted() -> None:
    commands = satind_commands(SCRIPT.read_text())
    assert {argv[0] for argv in commands} == {"keys", "start", "ready", "submit", "stop"}
    # What the variables hold on a node (the runs below check the real values); "$@" is the
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
        "3": "/shared/satind-state-1",
    }
    for argv in commands:
        words = [w for w in argv if w != "$@"] + (["fib", "25", "15"] if "$@" in argv else [])
        args = check(expand(words, env))
        if args.command == "start":
            assert (args.on_sigterm, args.drain_deadline) == ("drain", 20.0)
            cfg = start_config(args)  # the addresses and numbers are valid
            # Every interface; the members are given the node's name, which resolves on
            # every node; what the peers remember is the job's own.
            assert unspecified(cfg.daemon.host) and cfg.daemon.port == 7420
            assert cfg.daemon.advertise == "node2"
            assert cfg.daemon.state_dir == "/shared/satind-state-1"


def run_script(tmp_path: Path, env: dict[str, str]) -> tuple[str, str, list[int]]:
    """The script run with `fib 25 15` under the fake Slurm, with ``env`` beside what it
    needs; returns its output, its errors (the daemons' logs among them) and the daemons'
    pids, once it exited 0 (else fails with its errors)."""
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
    pids = tmp_path / "pids"
    full = {
        "PATH": f"{bin_dir}:{real.parent}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "FAKE_PIDS": str(pids),
        "SATIND_ARGV": str(tmp_path / "argv"),
        "SLURM_JOB_NODELIST": "fake[1-2]",
        "SLURM_JOB_ID": "4242",
        "SLURM_SUBMIT_DIR": str(tmp_path),
        "SLURM_CPUS_ON_NODE": "2",
        "SATIND_READY_S": "60",
        **env,
    }
    proc = subprocess.Popen(
        ["bash", str(SCRIPT), "fib", "25", "15"],
        env=full,
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
    return out, err, [int(p) for p in pids.read_text().split()]


def check_ran(tmp_path: Path, nodes: list[str], port: int) -> None:
    """Every satind command the script ran is one satind takes; each node's daemon listened
    on every interface and gave its node's name; the job's keys and state are gone."""
    ran = [line.split("\x1f")[:-1] for line in (tmp_path / "argv").read_text().splitlines()]
    assert {argv[0] for argv in ran} == {"keys", "start", "ready", "submit", "stop"}
    starts = []
    for argv in ran:
        args = check(argv)
        if args.command == "start":
            starts.append((args.name, args.listen, args.advertise))
    assert sorted(starts) == [(node, f"0.0.0.0:{port}", node) for node in nodes]
    assert not (tmp_path / "satind-keys-4242").exists()
    assert not (tmp_path / "satind-state-4242").exists()


@pytest.mark.slow
def test_the_script_runs_a_plugin_on_two_fake_nodes(tmp_path: Path) -> None:
    port = free_ports(2)
    out, err, daemons = run_script(
        tmp_path,
        {"FAKE_NODES": " ".join(NODES), "FAKE_LISTEN_AT_NODE": "1", "SATIND_PORT": str(port)},
    )
    assert "ready: 127.0.0.2/0 joined; 2 peers of 127.0.0.2 up; 4 members up" in out
    assert "75025" in out
    for node in NODES:
        assert f"satind {node} listens on {node} and gives the members {node} (--advertise)" in err
    # Every daemon exited (stopped by the script).
    assert len(daemons) == 2 and not any(alive(pid) for pid in daemons)
    check_ran(tmp_path, NODES, port)


@pytest.mark.slow
def test_the_script_runs_as_it_is_on_testbed_machines(tmp_path: Path) -> None:
    """Each node a testbed machine: a network namespace with an address of its own, reached
    from here (where the script's client commands run) over a bridge. The daemons listen on
    0.0.0.0:7420 as on real nodes and give each other their node's name (here its address)."""
    why = unavailable()
    if why:
        pytest.skip(f"no testbed here: {why}")
    network = Network.create(["n1", "n2"])
    namespaces = [network.netns(m) for m in network.machines]
    try:
        nodes = [network.ip(m) for m in network.machines]
        out, err, daemons = run_script(
            tmp_path,
            {
                "FAKE_NODES": " ".join(nodes),
                "FAKE_NETNS": " ".join(namespaces),
                "FAKE_PYTHON": sys.executable,
                "FAKE_ENTER": str(ENTER),
            },
        )
        first = nodes[0]
        assert f"ready: {first}/0 joined; 2 peers of {first} up; 4 members up" in out
        assert "75025" in out
        for node in nodes:
            said = f"satind {node} listens on 0.0.0.0 and gives the members {node} (--advertise)"
            assert said in err
        assert len(daemons) == 2 and not any(alive(pid) for pid in daemons)
        check_ran(tmp_path, nodes, 7420)
        assert not any(pids_in(ns) for ns in namespaces)
    finally:
        # Whatever is left in the machines is this test's: killed by id, then the network
        # goes (a namespace with a process in it would outlive its name).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            left = [pid for ns in namespaces for pid in pids_in(ns)]
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        network.destroy()
