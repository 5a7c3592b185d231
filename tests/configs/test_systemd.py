"""configs/systemd/satind.service: its ExecStart is a command satind accepts, with the
machine's config template, which listens on every interface and leaves the advertised address
to satind's default (its commented `advertise` is valid when uncommented); a stop drains within
the stop timeout; systemd-analyze accepts the unit (where the tool is)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from satind.cli.daemon import start_config
from satind.cli.exits import EXIT_USAGE
from satind.ops.advertise import parse_advertise, unspecified
from tests.configs.commands import CONFIGS, check

UNIT = CONFIGS / "systemd" / "satind.service"
TEMPLATE = CONFIGS / "systemd" / "satind.toml"


def unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """A unit file's sections, each key with its values in order (systemd allows a key
    more than once)."""
    sections: dict[str, dict[str, list[str]]] = {}
    section: dict[str, list[str]] = {}
    for raw in path.read_text().replace("\\\n", " ").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        section.setdefault(key.strip(), []).append(value.strip())
    return sections


def exec_start() -> list[str]:
    (line,) = unit(UNIT)["Service"]["ExecStart"]
    return shlex.split(line.lstrip("-@+!:"))


def seconds(value: str) -> float:
    """A systemd time span in seconds (plain seconds, or with s/min/h)."""
    for suffix, factor in (("min", 60.0), ("h", 3600.0), ("s", 1.0)):
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * factor
    return float(value)


def test_exec_start_is_a_satind_start_that_satind_accepts() -> None:
    program, *argv = exec_start()
    assert program.endswith("/satind")
    args = check(argv)
    assert args.command == "start"
    # With the config template in place of /etc/satind/satind.toml, the whole configuration
    # is valid: flags, file and the addresses in it.
    assert str(args.config) == "/etc/satind/satind.toml"
    args.config = TEMPLATE
    cfg = start_config(args)
    assert cfg.daemon.keys == "/etc/satind/keys"


def test_the_template_listens_on_every_interface_and_advertises_by_default() -> None:
    args = check(exec_start()[1:])
    args.config = TEMPLATE
    cfg = start_config(args)
    assert unspecified(cfg.daemon.host) and cfg.daemon.port == 7420
    # No advertised address: the daemon picks the interface that reaches the seeds.
    assert cfg.daemon.advertise == "" and cfg.daemon.seeds


def test_the_templates_commented_settings_are_valid_uncommented(tmp_path: Path) -> None:
    """`advertise` and `state_dir`, as the template shows them, are settings satind takes."""
    text = TEMPLATE.read_text()
    for key in ("advertise", "state_dir"):
        commented = f"# {key} = "
        assert text.count(commented) == 1, key
        text = text.replace(commented, f"{key} = ")
    copy = tmp_path / "satind.toml"
    copy.write_text(text)
    args = check(exec_start()[1:])
    args.config = copy
    cfg = start_config(args)
    parse_advertise(cfg.daemon.advertise)
    # The unit's XDG_STATE_HOME: the state directory the template names is the default one.
    (xdg,) = [
        line.partition("=")[2]
        for line in unit(UNIT)["Service"]["Environment"]
        if line.startswith("XDG_STATE_HOME=")
    ]
    assert cfg.daemon.state_dir == f"{xdg}/satind"


def test_a_stop_drains_and_fits_in_the_stop_timeout() -> None:
    service = unit(UNIT)["Service"]
    args = check(exec_start()[1:])
    args.config = TEMPLATE
    cfg = start_config(args)
    assert cfg.daemon.on_sigterm == "drain"
    assert service["KillSignal"] == ["SIGTERM"]
    # SIGTERM to the daemon only: it signals its peers itself.
    assert service["KillMode"] == ["mixed"]
    # After the deadline a peer cuts its work (cut_grace_s), says goodbye (leave_linger_s)
    # and exits; systemd's SIGKILL must come later than all of that.
    after_deadline = cfg.daemon.cut_grace_s + cfg.membership.leave_linger_s
    (timeout,) = service["TimeoutStopSec"]
    assert seconds(timeout) > cfg.daemon.drain_deadline_s + after_deadline + 30


def test_restarts_on_failure_but_not_on_a_configuration_error() -> None:
    service = unit(UNIT)["Service"]
    assert service["Restart"] == ["on-failure"]
    # satind's usage/configuration exit, which a start with the same settings repeats.
    assert service["RestartPreventExitStatus"] == [str(EXIT_USAGE)]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    # The unit as installed, with this environment's satind in place of /opt/satind's (verify
    # checks that the program exists).
    here = Path(sys.executable).parent / "satind"
    assert here.exists()
    text = UNIT.read_text().replace("/opt/satind/bin/satind", str(here))
    copy = tmp_path / "satind.service"
    copy.write_text(text)
    proc = subprocess.run(
        ["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
