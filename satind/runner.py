"""``satind run``: start local peers, submit one run, wait for it, stop the peers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from satind import control
from satind.config import Config
from satind.launcher import ephemeral_keys, local_peers
from satind.net import codec
from satind.net import messages as m
from satind.plugin import Plugin, PluginFailed, UnknownPlugin, UsageError


class RunFailed(Exception):
    """The run did not produce a result; ``code`` is the CLI exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Outcome:
    run_id: str
    value: Any
    elapsed_s: float
    peers: int
    stats: dict[str, int | float] = field(default_factory=dict)


@dataclass(frozen=True)
class LocalRun:
    """What `satind run` was asked for."""

    plugin: Plugin
    argv: Sequence[str]
    peers: int
    clusters: int = 1
    plugin_paths: Sequence[Path] = ()
    log_level: str = "WARNING"
    seed: int | None = None
    show_progress: bool = False


async def run_local(request: LocalRun, cfg: Config) -> Outcome:
    """Run a plugin on fresh local peers (mutual TLS with a throw-away CA held in memory)
    with the effective configuration ``cfg``, and return its outcome.

    Raises:
        RunFailed: the plugin raised (code 1), the arguments were refused (code 2), or the
            runtime failed (code 3).
        launcher.StartupError: a peer did not start.
    """
    keys = ephemeral_keys()
    credentials = keys.client if cfg.net.tls else None
    plugin = request.plugin
    async with local_peers(
        request.peers,
        keys=keys,
        clusters=request.clusters,
        plugin_paths=request.plugin_paths,
        cfg=cfg,
        log_level=request.log_level,
        seed=request.seed,
    ) as started:
        master = started[0]
        assert master.address is not None
        run_id = ""
        result: m.RunResult | None = None
        try:
            async with control.connect(master.address, cfg, credentials, master.name) as client:
                try:
                    run_id = await client.submit(plugin.name, list(request.argv), plugin.code_hash)
                except (UsageError, UnknownPlugin) as exc:
                    raise RunFailed(str(exc), 2) from None
                except PluginFailed as exc:
                    raise RunFailed(str(exc), 1) from None
                except control.SubmitRefused as exc:
                    raise RunFailed(str(exc), 3) from None
                if request.show_progress:
                    from satind.console import follow_run

                    result = await follow_run(client, run_id, plugin.name, list(request.argv), cfg)
                else:
                    result = await client.result(run_id)
        except (control.PeerUnavailable, control.RequestFailed) as exc:
            if not run_id:
                raise RunFailed(str(exc), 3) from None
            # The master is gone after accepting the run: another peer takes the run over
            # (master election); follow it through the survivors.
            survivors = [
                p.address
                for p in started[1:]
                if p.address is not None and p.process.returncode is None
            ]
            try:
                result = await control.follow_result(run_id, survivors, cfg, credentials)
            except control.RunLost as lost:
                raise RunFailed(str(lost), 3) from None
        assert result is not None
    if result.error is not None:
        err = result.error
        text = err.traceback.rstrip() or f"{err.type}: {err.message}"
        raise RunFailed(f"run {run_id} failed: {err.type}: {err.message}\n{text}", 1)
    assert result.value is not None
    return Outcome(
        run_id=run_id,
        value=codec.decode_value(result.value, cfg.net.max_depth),
        elapsed_s=result.elapsed_s,
        peers=result.peers,
        stats=dict(result.stats),
    )
