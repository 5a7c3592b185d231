"""``satind run``: start local peers, submit one run, wait for it, stop the peers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from satind import control
from satind.config import Config, StealAlgorithm
from satind.launcher import local_peers
from satind.net import codec
from satind.plugin import Plugin, UnknownPlugin, UsageError


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


async def run_local(
    plugin: Plugin,
    argv: Sequence[str],
    peers: int,
    clusters: int,
    steal: StealAlgorithm,
    plugin_paths: Sequence[Path],
    config_file: Path | None,
    cfg: Config,
    log_level: str = "WARNING",
    seed: int | None = None,
    show_progress: bool = False,
) -> Outcome:
    """Run ``plugin`` on ``peers`` fresh local peers and return its outcome.

    Raises:
        RunFailed: the plugin raised (code 1), the arguments were refused (code 2), or the
            runtime failed (code 3).
        launcher.StartupError: a peer did not start.
    """
    async with local_peers(
        peers,
        clusters=clusters,
        steal=steal,
        plugin_paths=plugin_paths,
        config_file=config_file,
        cfg=cfg,
        log_level=log_level,
        seed=seed,
    ) as started:
        master = started[0]
        assert master.address is not None
        try:
            async with control.connect(master.address, cfg, master.name) as client:
                try:
                    run_id = await client.submit(plugin.name, list(argv), plugin.code_hash)
                except (UsageError, UnknownPlugin) as exc:
                    raise RunFailed(str(exc), 2) from None
                except control.SubmitRefused as exc:
                    raise RunFailed(str(exc), 3) from None
                if show_progress:
                    from satind.console import follow_run

                    result = await follow_run(client, run_id, plugin.name, list(argv), cfg)
                else:
                    result = await client.result(run_id)
        except control.PeerUnavailable as exc:
            raise RunFailed(str(exc), 3) from None
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
