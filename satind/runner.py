"""``satind run``: start local peers, submit one run, wait for it, stop the peers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from satind import control
from satind.config import Config, StealAlgorithm
from satind.launcher import LOCAL_CLIENT, PeerProcess, ephemeral_keys, local_peers
from satind.net import codec, tls
from satind.net import messages as m
from satind.plugin import Plugin, PluginFailed, UnknownPlugin, UsageError


async def _result_from_survivors(
    run_id: str, peers: Sequence[PeerProcess], cfg: Config, credentials: tls.Credentials | None
) -> m.RunResult:
    """Wait for a run's result through any peer still alive (it relays to the current master).

    Raises:
        RunFailed: no peer answers.
    """
    for peer in peers:
        if peer.address is None or peer.process.returncode is not None:
            continue
        try:
            async with control.connect(peer.address, cfg, credentials, peer.name) as client:
                reply = await client.fetch_result(run_id, True, cfg.client.timeout_s)
        except control.PeerUnavailable:
            continue
        if reply.result is not None:
            return reply.result
    raise RunFailed(f"the master of run {run_id} is gone and no other peer has its result", 3)


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
    steal: StealAlgorithm | None = None
    plugin_paths: Sequence[Path] = ()
    config_file: Path | None = None
    log_level: str = "WARNING"
    seed: int | None = None
    show_progress: bool = False


async def run_local(request: LocalRun, cfg: Config) -> Outcome:
    """Run a plugin on fresh local peers (mutual TLS with a throw-away CA) and return its
    outcome.

    Raises:
        RunFailed: the plugin raised (code 1), the arguments were refused (code 2), or the
            runtime failed (code 3).
        launcher.StartupError: a peer did not start.
    """
    with ephemeral_keys() as keys:
        return await _run(request, cfg, keys)


async def _run(request: LocalRun, cfg: Config, keys: Path) -> Outcome:
    credentials = tls.Credentials.load(keys, LOCAL_CLIENT, tls.ROLE_CLIENT) if cfg.net.tls else None
    plugin = request.plugin
    async with local_peers(
        request.peers,
        keys=keys,
        clusters=request.clusters,
        steal=request.steal,
        plugin_paths=request.plugin_paths,
        config_file=request.config_file,
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
        except control.PeerUnavailable as exc:
            if not run_id:
                raise RunFailed(str(exc), 3) from None
            # The master is gone after accepting the run: another peer takes the run over
            # (master election); ask the survivors for its result.
            result = await _result_from_survivors(run_id, started[1:], cfg, credentials)
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
