"""`satind start`'s flags over the configuration (cli/daemon.py), read by the command's own
parser (cli/parser.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from satind import config as config_mod
from satind.cli.daemon import start_config
from satind.cli.exits import CliError
from satind.cli.parser import parse


def test_sigterm_and_the_drain_deadline_come_from_the_command_line() -> None:
    args = parse(["start", "--keys", "k", "--on-sigterm", "drain", "--drain-deadline", "30"])
    cfg = start_config(args)
    assert (cfg.daemon.on_sigterm, cfg.daemon.drain_deadline_s) == ("drain", 30.0)


def test_without_the_flags_the_configuration_decides() -> None:
    cfg = start_config(parse(["start", "--keys", "k"]))
    default = config_mod.DEFAULT.daemon
    assert (cfg.daemon.on_sigterm, cfg.daemon.drain_deadline_s) == (
        default.on_sigterm,
        default.drain_deadline_s,
    )


def test_accept_shipped_comes_from_the_command_line_or_the_file(tmp_path: Path) -> None:
    assert not config_mod.DEFAULT.plugins.accept_shipped  # off unless the operator says so
    assert start_config(parse(["start", "--keys", "k", "--accept-shipped"])).plugins.accept_shipped
    assert not start_config(parse(["start", "--keys", "k"])).plugins.accept_shipped
    file = tmp_path / "on.toml"
    file.write_text("[plugins]\naccept_shipped = true\n")
    on = start_config(parse(["start", "--keys", "k", "--config", str(file)]))
    assert on.plugins.accept_shipped  # the flag's absence does not turn the file's yes off


@pytest.mark.parametrize(
    "argv",
    [
        ["start", "--drain-deadline", "-1"],
        ["start", "--drain-deadline", "nan"],
        ["start", "--seeds", "no-port"],
        ["start", "--listen", "host:99999"],
    ],
)
def test_bad_values_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(CliError):
        start_config(parse(argv))


def test_an_unknown_sigterm_action_is_refused_by_the_parser() -> None:
    with pytest.raises(SystemExit):
        parse(["start", "--on-sigterm", "ignore"])


def test_parse_reads_global_options_before_the_command() -> None:
    args = parse(["--log-level", "warning", "start", "--seeds", "satind:7420"])
    assert (args.command, args.log_level, args.seeds) == ("start", "WARNING", "satind:7420")
    assert parse([]).command is None
