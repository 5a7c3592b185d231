"""``satind run``: start local peers, submit one run, wait for it, stop the peers.

``run_local`` returns what happened as a value — the run's outcome, or a ``Failure`` saying
whose fault it was — and the command line maps it to an exit code (``cli/exits.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from satind import stats
from satind.client import client as remote
from satind.client.files import ClientFiles, unsaved
from satind.client.follow import follow_result
from satind.config import Config
from satind.net import codec
from satind.net import messages as m
from satind.ops.launcher import StartupError, ephemeral_keys, local_peers
from satind.plugin import Plugin, PluginFailed, UnknownPlugin, UsageError, Verdict

# Shows a run's progress while waiting for its result (client, run id, plugin name, arguments,
# configuration): the command line passes its console's, so the client need not import it.
Progress = Callable[[remote.Client, str, str, list[str], Config], Awaitable[m.RunResult]]


@dataclass
class Outcome:
    """A run that gave a value."""

    run_id: str
    value: Any
    elapsed_s: float
    peers: int
    stats: dict[str, int | float] = field(default_factory=dict)
    # What the user sees (the plugin's report, made on the master; else the value) and the
    # verdict of the plugin's check there ("ok", "skipped", "not checked: ...", "failed: ...").
    report: Any = None
    check: str = "skipped"
    # Seconds after the root's end spent on the members' statistics and the plugin's check.
    finish_s: float = 0.0
    # What became of each output file the plugin's report made (client/files.py).
    outputs: dict[str, str] = field(default_factory=dict)

    @property
    def efficiency(self) -> float | None:
        """Its efficiency from the peers' own accounting (``stats.efficiency``)."""
        return stats.efficiency(self.stats, self.peers, self.elapsed_s)


# Errors of runs an operator stopped, not of runs that failed (core/lifecycle.stopped_result).
STOPPED = frozenset({"RunCancelled", "RunSuspended"})


@dataclass(frozen=True)
class Failure:
    """A run that gave no value: the arguments were refused ("usage"), the plugin raised
    ("plugin"), or the runtime failed ("runtime": a peer did not start or answer)."""

    kind: Literal["usage", "plugin", "runtime"]
    message: str


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
    # How to wait for the result while showing progress; None: print the run's output only.
    progress: Progress | None = None
    check: bool = True
    # Write the run's trace here (Chrome trace-event JSON, satind/trace.py).
    trace: Path | None = None
    # The run's input and output files on this machine (sent to the peers, written here).
    files: ClientFiles | None = None
    # The verdicts on the plugin modules (plugin.load): the peers need not vet them again.
    vetted: dict[str, Verdict] = field(default_factory=dict)


async def run_local(request: LocalRun, cfg: Config) -> Outcome | Failure:
    """Run a plugin on fresh local peers (mutual TLS with a throw-away CA held in memory)
    with the effective configuration ``cfg``."""
    keys = ephemeral_keys()
    credentials = keys.client if cfg.net.tls else None
    plugin = request.plugin
    try:
        async with local_peers(
            request.peers,
            keys=keys,
            clusters=request.clusters,
            plugin_paths=request.plugin_paths,
            cfg=cfg,
            log_level=request.log_level,
            seed=request.seed,
            vetted=request.vetted,
        ) as started:
            master = started[0]
            assert master.address is not None
            run_id = ""
            try:
                async with remote.connect(master.address, cfg, credentials, master.name) as client:
                    try:
                        run_id = await client.submit(
                            plugin.name,
                            list(request.argv),
                            plugin.code_hash,
                            request.check,
                            request.files,
                        )
                    except (UsageError, UnknownPlugin) as exc:
                        return Failure("usage", str(exc))
                    except PluginFailed as exc:
                        return Failure("plugin", str(exc))
                    except remote.SubmitRefused as exc:
                        return Failure("runtime", str(exc))
                    if request.progress is not None:
                        result = await request.progress(
                            client, run_id, plugin.name, list(request.argv), cfg
                        )
                    else:
                        result = await client.result_with_output(run_id, remote.to_stderr)
                    if request.trace is not None:
                        await remote.save_trace(client, run_id, request.trace)
            except (remote.PeerUnavailable, remote.RequestFailed) as exc:
                if not run_id:
                    return Failure("runtime", str(exc))
                # The master is gone after accepting the run: another peer takes the run over
                # (master election); follow it through the survivors.
                survivors = [
                    p.address
                    for p in started[1:]
                    if p.address is not None and p.process.returncode is None
                ]
                try:
                    result = await follow_result(run_id, survivors, cfg, credentials)
                except remote.RunLost as lost:
                    return Failure("runtime", str(lost))
    except StartupError as exc:
        return Failure("runtime", f"peers did not start: {exc}")
    outcome = outcome_of(result, cfg)
    if isinstance(outcome, Outcome):
        outcome.outputs = request.files.save(result) if request.files else unsaved(result)
    return outcome


def outcome_of(result: m.RunResult, cfg: Config) -> Outcome | Failure:
    """What a run's result means: its value, or the error its plugin raised."""
    if result.error is not None:
        err = result.error
        if err.type in STOPPED:
            # An operator stopped it: no failure, nothing to trace; its message says it once
            # ("run ... was cancelled", "... suspended; `satind resume ...` continues it").
            return Failure("plugin", err.message)
        head = f"run {result.run_id} failed: {err.type}: {err.message}"
        trace = err.traceback.rstrip()
        return Failure("plugin", f"{head}\n{trace}" if trace else head)
    assert result.value is not None
    value = codec.decode_value(result.value, cfg.net.max_depth)
    shown = value if result.report is None else codec.decode_value(result.report, cfg.net.max_depth)
    return Outcome(
        run_id=result.run_id,
        value=value,
        elapsed_s=result.elapsed_s,
        peers=result.peers,
        stats=dict(result.stats),
        report=shown,
        check=result.check,
        finish_s=result.finish_s,
    )
