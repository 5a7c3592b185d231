"""What the commands share: the configuration with their flags over it, and a client
connection to the peer at ``--to``."""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from satind import config as config_mod
from satind.cli.exits import EXIT_USAGE, CliError
from satind.client import client as remote
from satind.net import tls
from satind.net.transport import parse_address


def load_config(path: Path | None) -> config_mod.Config:
    try:
        return config_mod.load(path)
    except config_mod.ConfigError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def heuristic_flag(args: argparse.Namespace) -> str | None:
    """``--heuristic``'s value as config takes it (``emct-star`` -> ``emct*``), or None.

    Raises:
        CliError: no such heuristic.
    """
    if args.heuristic is None:
        return None
    from satind.volatile.heuristics import canonical

    try:
        return canonical(args.heuristic)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def flags_of(cfg: config_mod.Config, flags: dict[str, dict[str, Any]]) -> config_mod.Config:
    """The configuration with the command's flags over it (``config.apply_flags``)."""
    try:
        return config_mod.apply_flags(cfg, flags)
    except config_mod.ConfigError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def env_default(flag: str | None, env: str, configured: str) -> str:
    return flag or os.environ.get(env) or configured


@asynccontextmanager
async def connected(
    args: argparse.Namespace, cfg: config_mod.Config
) -> AsyncIterator[remote.Client]:
    """A client connected to the peer at --to (or $SATIND_TO, or [client] to), with the client
    certificate from --keys (or $SATIND_KEYS, or [client] keys).

    Raises:
        CliError: no keys, a bad address, or unusable keys (usage errors).
        PeerUnavailable: the peer does not answer.
    """
    to = env_default(args.to, "SATIND_TO", cfg.client.to)
    keys = env_default(args.keys, "SATIND_KEYS", cfg.client.keys)
    if not keys:
        raise CliError(
            "no keys: pass --keys DIR or set SATIND_KEYS (make them with `satind keys init DIR`)",
            EXIT_USAGE,
        )
    try:
        address = parse_address(to)
        credentials = tls.Credentials.load(
            Path(keys), args.as_name or cfg.client.name, tls.ROLE_CLIENT
        )
    except (ValueError, tls.KeysError) as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    async with remote.connect(address, cfg, credentials if cfg.net.tls else None) as client:
        yield client
