"""configs/docker/: what can be checked without a Docker engine. The Dockerfile's
instructions and the files it copies; the command lines of the image, of the compose services
and of their healthchecks, with satind's parser; the compose file's structure (where a YAML
parser is installed: satind has none and takes none on for this); and satind-start itself:
what it runs under each of its variables, and a daemon run here as a container would run it,
on every interface, giving the address satind picks by default."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from satind.cli.daemon import start_config
from satind.ops import advertise
from tests.configs.commands import CONFIGS, check, satind_commands
from tests.integration.procs import alive, children_of, free_ports

DOCKER = CONFIGS / "docker"
ROOT = CONFIGS.parent
INSTRUCTIONS = {
    "FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
    "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL",
}  # fmt: skip


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, its arguments) of each line, continuations joined, comments dropped."""
    text = re.sub(r"\\\n(\s*#.*\n)*", " ", (DOCKER / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            out.append((word, rest.strip()))
    return out


def satind_start(args: list[str], env: dict[str, str] | None = None) -> list[str]:
    """The satind arguments satind-start runs with ``args`` and the variables ``env``: the
    script run with a `satind` on its PATH that only prints them."""
    with tempfile.TemporaryDirectory() as bin_dir:
        fake = Path(bin_dir) / "satind"
        fake.write_text("#!/bin/sh\nprintf '%s\\0' \"$@\"\n")
        fake.chmod(0o755)
        proc = subprocess.run(
            ["sh", str(DOCKER / "satind-start"), *args],
            env={"PATH": f"{bin_dir}:/usr/bin:/bin", **(env or {})},
            capture_output=True,
            check=True,
        )
    return proc.stdout.decode().split("\0")[:-1]


def as_satind(command: list[str]) -> list[str]:
    """A container's command as the satind arguments it runs (satind-start's, as it runs
    them without any of its variables set)."""
    if command[0] == "satind-start":
        return satind_start(command[1:])
    assert command[0] == "satind", command
    return command[1:]


def test_the_dockerfile_uses_known_instructions_and_copies_what_exists() -> None:
    steps = dockerfile()
    assert {word for word, _ in steps} <= INSTRUCTIONS
    allowed = {
        line[1:]
        for line in (DOCKER / "Dockerfile.dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    for word, rest in steps:
        if word != "COPY" or rest.startswith("--from"):
            continue
        *sources, _target = rest.split()
        for source in sources:
            assert (ROOT / source).exists(), source
            # Kept in the build context by the ignore file (which leaves out everything else).
            assert source in allowed, f"{source} is not in Dockerfile.dockerignore's list"
    for word, rest in steps:
        if word == "RUN":
            for argv in satind_commands(rest):
                check(argv)


def test_the_image_runs_the_daemon_under_tini() -> None:
    steps = dict(dockerfile())
    assert json.loads(steps["ENTRYPOINT"]) == ["tini", "--"]
    args = check(as_satind(json.loads(steps["CMD"])))
    assert args.command == "start" and args.keys == "/keys"
    start_config(args)


def test_satind_start_is_valid_shell_running_satind_start() -> None:
    script = DOCKER / "satind-start"
    proc = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert satind_commands(script.read_text()) == [["start", "--listen", "$listen", "$@"]]


@pytest.mark.parametrize(
    ("env", "listen", "advertised"),
    [
        # Every interface; the advertised address is satind's default.
        ({}, "0.0.0.0:7420", None),
        ({"SATIND_PORT": "8000"}, "0.0.0.0:8000", None),
        ({"SATIND_ADVERTISE": "203.0.113.7:30000"}, "0.0.0.0:7420", "203.0.113.7:30000"),
        # As before --advertise: one address, which is then the advertised one too.
        ({"SATIND_LISTEN": "10.244.1.7:7420"}, "10.244.1.7:7420", None),
        ({"SATIND_LISTEN": "10.244.1.7:7420", "SATIND_ADVERTISE": "n1"}, "10.244.1.7:7420", "n1"),
    ],
)
def test_satind_start_listens_and_advertises_as_its_variables_say(
    env: dict[str, str], listen: str, advertised: str | None
) -> None:
    argv = satind_start(["--keys", "/keys", "--name", "node-a"], env)
    args = check(argv)
    assert (args.listen, args.advertise) == (listen, advertised)
    cfg = start_config(args)
    assert cfg.daemon.advertise == (advertised or "") and cfg.daemon.name == "node-a"
    # Options given to satind-start come last: a --listen or --advertise there wins.
    args = check(satind_start(["--listen", "0.0.0.0:9000", "--advertise", "h"], env))
    assert (args.listen, args.advertise) == ("0.0.0.0:9000", "h")


def compose() -> dict[str, Any]:
    yaml = pytest.importorskip("yaml", reason="no YAML parser installed (satind needs none)")
    loaded: dict[str, Any] = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    return loaded


def seconds(value: str) -> float:
    match = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", value)
    assert match and value, value
    return 60.0 * int(match.group(1) or 0) + int(match.group(2) or 0)


def test_compose_runs_two_machines_the_second_seeded_by_the_first_service() -> None:
    services = compose()["services"]
    assert set(services) == {"keys", "node-a", "node-b"}
    env = dict(dockerfile())["ENV"]
    assert env.startswith("XDG_STATE_HOME=")
    state = env.partition("=")[2]
    names = set()
    for service in ("node-a", "node-b"):
        spec = services[service]
        args = check(as_satind(spec["command"]))
        cfg = start_config(args)
        names.add(cfg.daemon.name)
        assert f"keys:{args.keys}" in spec["volumes"]
        # Every interface, and no --advertise: with one network, satind's default (the
        # interface that reaches the seeds, or the default route's) is the container's address.
        assert (args.listen, args.advertise) == ("0.0.0.0:7420", None)
        assert "SATIND_ADVERTISE" not in spec["environment"]
        assert "SATIND_LISTEN" not in spec["environment"]
        # The run history and the remembered members ($XDG_STATE_HOME/satind, the default
        # state directory) are on the machine's own volume.
        assert cfg.daemon.state_dir == ""
        assert f"{service}-state:{state}" in spec["volumes"]
        # A stop drains within the stop's grace period.
        assert cfg.daemon.on_sigterm == "drain"
        assert seconds(spec["stop_grace_period"]) > cfg.daemon.drain_deadline_s + 10
        # The healthcheck is `satind ready` at this container's peers.
        test = spec["healthcheck"]["test"]
        assert test[0] == "CMD" and check(as_satind(test[1:])).command == "ready"
        assert spec["environment"]["SATIND_TO"] == f"{spec['hostname']}:7420"
        assert spec["depends_on"]["keys"]["condition"] == "service_completed_successfully"
    assert "--seeds" not in services["node-a"]["command"]
    seeds = services["node-b"]["command"]
    assert seeds[seeds.index("--seeds") + 1] == "node-a:7420"  # the first's service name
    # The one-shot keys service issues a certificate for each machine's name.
    keys = services["keys"]
    made = satind_commands(keys["command"][2])
    for argv in made:
        check(argv)
    assert {argv[3] for argv in made if argv[:2] == ["keys", "issue"]} == names


@pytest.mark.slow
def test_satind_start_runs_a_daemon_that_sigterm_drains(tmp_path: Path) -> None:
    """satind-start as the container runs it, with the options of a compose service: on
    every interface, giving the members the address satind picks (this machine's, as a
    container's would be); readiness as its healthcheck asks; then docker stop's SIGTERM."""
    satind = [sys.executable, "-m", "satind"]
    keys = tmp_path / "keys"
    for argv in (["keys", "init", str(keys)], ["keys", "issue", str(keys), "node-a"]):
        assert subprocess.run([*satind, *argv], capture_output=True).returncode == 0
    port = free_ports(2)
    listen = f"127.0.0.1:{port}"  # where the client commands find it: every interface's
    bin_dir = Path(sys.executable).parent
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "SATIND_PORT": str(port)}
    try:
        given, why = advertise.choose([])  # what a machine without seeds gives
    except advertise.NoAddress:  # loopback only: satind refuses 0.0.0.0 without --advertise
        given, why = "127.0.0.1", "--advertise"
        env["SATIND_ADVERTISE"] = given
    log = (tmp_path / "daemon.log").open("w")
    daemon = subprocess.Popen(
        ["sh", str(DOCKER / "satind-start"), "--keys", str(keys), "--name", "node-a",
         "--peers", "2", "--on-sigterm", "drain", "--drain-deadline", "5"],
        env=env, stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    peers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            proc = subprocess.run(
                [*satind, "ready", "--peers", "2", "--timeout", "4"],
                env={**env, "SATIND_TO": listen, "SATIND_KEYS": str(keys)},
                capture_output=True,
                text=True,
            )
            if proc.returncode == 0:
                break
            assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()
            assert time.monotonic() < deadline, proc.stderr
            time.sleep(0.3)
        assert proc.stdout.strip() == "ready: node-a/0 joined; 2 peers of node-a up; 2 members up"
        said = f"satind node-a listens on 0.0.0.0 and gives the members {given} ({why})"
        assert said in (tmp_path / "daemon.log").read_text()
        peers = children_of(daemon.pid)  # sh exec'd satind: the daemon is this very process
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0
        assert not any(alive(pid) for pid in peers)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        for pid in peers:
            if alive(pid):
                subprocess.run(["kill", "-9", str(pid)], check=False)
        log.close()
