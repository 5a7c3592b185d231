"""Where a client connects and as whom (``target``), and the configuration it uses: the
arguments, else the environment (SATIND_TO, SATIND_KEYS, SATIND_CONFIG), else the config."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from satind import config as config_mod
from satind.net import tls
from satind.net.transport import Address, parse_address


@dataclass(frozen=True)
class Target:
    """Where a client connects and as whom: the peer's address, the client certificate (None
    without TLS) and the configuration its timeouts come from."""

    address: Address
    credentials: tls.Credentials | None
    cfg: config_mod.Config


def target(
    to: str | None = None,
    keys: str | os.PathLike[str] | None = None,
    *,
    name: str | None = None,
    config: str | os.PathLike[str] | config_mod.Config | None = None,
) -> Target:
    """Resolve where to connect: each of ``to`` and ``keys`` from the argument, else
    ``$SATIND_TO`` / ``$SATIND_KEYS``, else the ``[client]`` section of ``config`` (a TOML
    file, else ``$SATIND_CONFIG``). ``~`` in a path is the home directory.

    Raises:
        ValueError: no keys anywhere, a bad address, or keys that cannot be used (the
            message says which and how to fix it); config.ConfigError: a bad config file.
    """
    cfg = load_config(config)
    where = to or os.environ.get("SATIND_TO") or cfg.client.to
    directory = str(keys or "") or os.environ.get("SATIND_KEYS") or cfg.client.keys
    if not directory and cfg.net.tls:
        raise ValueError(
            "no keys: pass keys=DIR, or set SATIND_KEYS, or [client] keys in the config "
            "(make them with `satind keys init DIR`)"
        )
    try:
        address = parse_address(where)
    except ValueError as exc:
        raise ValueError(f"bad address {where!r}: {exc} (give HOST:PORT)") from None
    credentials = None
    if cfg.net.tls:
        try:
            credentials = tls.Credentials.load(
                Path(directory).expanduser(), name or cfg.client.name, tls.ROLE_CLIENT
            )
        except tls.KeysError as exc:
            raise ValueError(str(exc)) from None
    return Target(address, credentials, cfg)


def load_config(config: str | os.PathLike[str] | config_mod.Config | None) -> config_mod.Config:
    """The configuration a client uses: ``config`` itself, or the TOML file it names, or the
    one ``$SATIND_CONFIG`` names, or the defaults.

    Raises:
        config.ConfigError: the file cannot be read or names unknown settings.
    """
    if isinstance(config, config_mod.Config):
        return config
    path = config if config is not None else os.environ.get("SATIND_CONFIG")
    return config_mod.load(Path(path).expanduser() if path else None)
