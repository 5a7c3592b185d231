"""Runs on local peers of the caller's own (the embedded default of ``satind run``), from
Python: ``run_local_async`` for one run, ``open_local_cluster`` for a cluster that lives as
long as an ``async with`` (satind.Executor's ``local=True``)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from satind import config as config_mod
from satind.client import client as remote
from satind.client.api import Cluster, load_config
from satind.client.submission import plugin_dirs, submission


async def run_local_async(
    what: Any,
    *args: Any,
    peers: int | None = None,
    plugin_path: Sequence[Path] = (),
    config: str | os.PathLike[str] | config_mod.Config | None = None,
) -> Any:
    """Start ``peers`` local peers (one per CPU by default; mutual TLS with throw-away keys,
    as ``satind run`` does), run ``what`` with ``args`` on them (as ``Cluster.submit``),
    stop them, and return the run's value. A function's plugin file is found by the peers
    in its own directory; ``plugin_path`` adds others (for a plugin submitted by name).

    Raises:
        what ``Cluster.submit`` and ``Run.result`` raise; PeerUnavailable: the peers did not
        start (the message says why).
    """
    cfg = load_config(config)
    # Checked before any peer starts: a function that cannot be submitted costs nothing.
    submission(what, args, cfg.net.max_frame_bytes)
    paths = [*plugin_path, *(d for d in plugin_dirs(what) if d not in plugin_path)]
    async with open_local_cluster(peers, paths, cfg) as cluster:
        run = await cluster.submit(what, *args)
        return await run.result()


@asynccontextmanager
async def open_local_cluster(
    peers: int | None = None,
    plugin_path: Sequence[Path] = (),
    config: str | os.PathLike[str] | config_mod.Config | None = None,
    accept_shipped: bool = False,
) -> AsyncIterator[Cluster]:
    """Start ``peers`` local peers (one per CPU by default; mutual TLS with throw-away keys,
    as ``satind run`` does) with ``plugin_path``, connected to for the body of an ``async
    with``; stop them after. ``accept_shipped``: they accept shipped code (satind.Executor).

    Raises:
        PeerUnavailable: the peers did not start (the message says why).
    """
    from satind.ops.launcher import StartupError, ephemeral_keys, local_peers

    cfg = load_config(config)
    if accept_shipped:
        cfg = replace(cfg, plugins=replace(cfg.plugins, accept_shipped=True))
    count = peers if peers is not None else config_mod.default_peer_count()
    if count < 1:
        raise ValueError("peers must be at least 1")
    keys = ephemeral_keys()
    credentials = keys.client if cfg.net.tls else None
    try:
        async with local_peers(count, keys=keys, plugin_paths=plugin_path, cfg=cfg) as started:
            master = started[0]
            assert master.address is not None
            async with remote.connect(master.address, cfg, credentials, master.name) as client:
                yield Cluster(client, cfg)
    except StartupError as exc:
        raise remote.PeerUnavailable(f"the local peers did not start: {exc}") from None
