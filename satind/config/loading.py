"""Settings from outside: a TOML config file, overrides and command-line flags over a
configuration, checked setting by setting; the effective configuration as TOML; a peer's own.

No default lives here: the sections (satind/config/) hold them all, and everything below only
replaces values in them.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path
from typing import Any

from satind.config.root import DEFAULT, Config
from satind.volatile.heuristics import NAMES as HEURISTICS


class ConfigError(ValueError):
    """A config file or override names an unknown setting or gives a value of the wrong type."""


# Settings whose values come from a fixed set.
CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("steal", "algorithm"): ("rs", "crs"),
    ("daemon", "on_sigterm"): ("leave", "drain"),
    ("checkpoint", "policy"): ("orphans", "tic", "sel"),
    ("iterative", "heuristic"): HEURISTICS,
}


def with_overrides(cfg: Config, overrides: dict[str, Any]) -> Config:
    """Return ``cfg`` with ``{"section": {"name": value}}`` overrides applied, type-checked.

    Raises:
        ConfigError: an unknown section or setting, or a value of the wrong type.
    """
    changes: dict[str, Any] = {}
    for section_name, values in overrides.items():
        if not hasattr(cfg, section_name):
            known = ", ".join(f.name for f in dataclasses.fields(cfg))
            raise ConfigError(f"unknown config section [{section_name}]; known: {known}")
        section = getattr(cfg, section_name)
        if not isinstance(values, dict):
            raise ConfigError(f"[{section_name}] must be a table of settings")
        fields = {f.name: f for f in dataclasses.fields(section)}
        for name, value in values.items():
            if name not in fields:
                raise ConfigError(
                    f"unknown setting {section_name}.{name}; known: {', '.join(fields)}"
                )
            current = getattr(section, name)
            ok = isinstance(value, type(current)) or (
                isinstance(current, float) and isinstance(value, int)
            )
            if isinstance(current, list):
                ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
            if not ok or isinstance(value, bool) != isinstance(current, bool):
                kind = "a list of strings" if isinstance(current, list) else type(current).__name__
                raise ConfigError(f"{section_name}.{name} must be {kind}, got {value!r}")
            allowed = CHOICES.get((section_name, name))
            if allowed is not None and value not in allowed:
                raise ConfigError(
                    f"{section_name}.{name} must be one of {', '.join(allowed)}, got {value!r}"
                )
            if isinstance(current, float):
                values = {**values, name: float(value)}
        changes[section_name] = dataclasses.replace(section, **values)
    return dataclasses.replace(cfg, **changes)


def apply_flags(cfg: Config, flags: dict[str, dict[str, Any]]) -> Config:
    """Command-line flags over a configuration: ``{"section": {"setting": value}}``, None
    meaning "not given". The one place where flags meet the configuration, checked as a
    config file's settings are.

    Raises:
        ConfigError: a flag's value is of the wrong type or not among the allowed choices.
    """
    given = {
        section: {name: value for name, value in values.items() if value is not None}
        for section, values in flags.items()
    }
    return with_overrides(cfg, {section: values for section, values in given.items() if values})


def load(path: Path | None, base: Config = DEFAULT) -> Config:
    """Load a TOML config file over ``base``.

    Raises:
        ConfigError: the file cannot be read or parsed, or names unknown settings.
    """
    if path is None:
        return base
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from exc
    try:
        return with_overrides(base, data)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def to_toml(cfg: Config) -> str:
    """The effective configuration as TOML (for `satind config show`)."""
    lines: list[str] = []
    for section in dataclasses.fields(cfg):
        values = getattr(cfg, section.name)
        lines.append(f"[{section.name}]")
        for item in dataclasses.fields(values):
            lines.append(f"{item.name} = {_toml_value(getattr(values, item.name))}")
        lines.append("")
    return "\n".join(lines)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value)  # strings and lists of strings: JSON syntax is valid TOML here


def for_peer(cfg: Config, index: int) -> Config:
    """The configuration of a machine's peer ``index``: it serves metrics and its dashboard
    on port + index (port 0: any free port, for each peer)."""
    if cfg.metrics.enabled and cfg.metrics.port:
        metrics = dataclasses.replace(cfg.metrics, port=cfg.metrics.port + index)
        cfg = dataclasses.replace(cfg, metrics=metrics)
    if cfg.dashboard.enabled and cfg.dashboard.port:
        dashboard = dataclasses.replace(cfg.dashboard, port=cfg.dashboard.port + index)
        cfg = dataclasses.replace(cfg, dashboard=dashboard)
    return cfg
