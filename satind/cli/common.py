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
from satind.client import api
from satind.client import client as remote


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
    certificate from --keys (or $SATIND_KEYS, or [client] keys): the Python API's
    ``target`` (client/api.py) decides, so the two never differ.

    Raises:
        CliError: no keys, a bad address, or unusable keys (usage errors).
        PeerUnavailable: the peer does not answer.
    """
    try:
        where = api.target(args.to, args.keys, name=args.as_name, config=cfg)
    except ValueError as exc:
        raise CliError(str(exc).replace("keys=DIR", "--keys DIR"), EXIT_USAGE) from None
    async with remote.connect(where.address, cfg, where.credentials) as client:
        yield client


@asynccontextmanager
async def cluster_of(
    args: argparse.Namespace, cfg: config_mod.Config
) -> AsyncIterator[api.Cluster]:
    """The Python API's Cluster over ``connected``: what the commands about runs use."""
    async with connected(args, cfg) as client:
        yield api.Cluster(client, cfg)
