"""The peer's checkpoint writer (satin-grid-programming-model §4.4; kaapi §3): the records to
append to its log, the loop that appends them off the trio thread every ``interval_s`` (and at
every theft with policy "tic"), and where logs go (``LogStore``: files in a directory, or the
simulator's shared memory). The log format is ``recovery/checkpoint.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import trio

from satind.config import CheckpointConfig
from satind.core.model.checkpoint import CheckpointCounters
from satind.net import messages as m
from satind.recovery.checkpoint import (
    LogContents,
    append,
    frame,
    load_blobs,
    load_directory,
    log_path,
    prune_file,
    prune_log,
)

log = logging.getLogger(__name__)


class LogStore(Protocol):
    """Where a peer's log goes and where a resume reads every peer's log from."""

    where: str

    async def append(self, peer: str, records: list[bytes]) -> int:
        """Append records to ``peer``'s log; returns bytes written. Raises OSError."""
        ...

    async def load(self) -> LogContents: ...

    async def prune(self, peer: str) -> int:
        """Drop the records of ended runs from ``peer``'s log; returns bytes dropped."""
        ...


class FileStore:
    """Log files in a directory (a local disk or a shared mount); file work runs off the
    trio thread so that a slow disk never stalls the peer."""

    def __init__(self, directory: Path, fsync: bool = True) -> None:
        self.directory = directory
        self.fsync = fsync
        self.where = str(directory)

    async def append(self, peer: str, records: list[bytes]) -> int:
        path = log_path(self.directory, peer)
        path.parent.mkdir(parents=True, exist_ok=True)
        return await trio.to_thread.run_sync(append, path, records, self.fsync)

    async def load(self) -> LogContents:
        return await trio.to_thread.run_sync(load_directory, self.directory)

    async def prune(self, peer: str) -> int:
        return await trio.to_thread.run_sync(prune_file, log_path(self.directory, peer), self.fsync)


class MemoryStore:
    """Logs in memory, shared by every peer given the same store: the simulator's checkpoint
    mount. Appends are synchronous, so a simulation stays deterministic under the mock
    clock (a thread would let virtual time jump while it runs)."""

    def __init__(self, where: str = "memory") -> None:
        self.where = where
        self.logs: dict[str, bytearray] = {}

    async def append(self, peer: str, records: list[bytes]) -> int:
        data = b"".join(records)
        self.logs.setdefault(peer, bytearray()).extend(data)
        await trio.lowlevel.checkpoint()
        return len(data)

    async def load(self) -> LogContents:
        await trio.lowlevel.checkpoint()
        return load_blobs((name, bytes(self.logs[name])) for name in sorted(self.logs))

    async def prune(self, peer: str) -> int:
        await trio.lowlevel.checkpoint()
        data = bytes(self.logs.get(peer, b""))
        pruned = prune_log(data)
        self.logs[peer] = bytearray(pruned)
        return len(data) - len(pruned)


class Checkpointer:
    """A peer's side: the records to append, and the loop that appends them off the trio
    thread every ``interval_s`` (and at every theft from this peer with policy "tic")."""

    def __init__(
        self,
        cfg: CheckpointConfig,
        peer: str,
        store: LogStore | None = None,
        counters: CheckpointCounters | None = None,
    ) -> None:
        self.cfg = cfg
        self.peer = peer
        # No store given: the configured directory, if any (empty: checkpoints are off).
        if store is None and cfg.dir:
            store = FileStore(Path(cfg.dir), cfg.fsync)
        self.store = store
        # What it wrote, where the peer's statistics read it.
        self.counters = counters if counters is not None else CheckpointCounters()
        self.counters.enabled = store is not None
        self.counters.policy = cfg.policy if store is not None else ""
        # Policy "tic": asks the compute side for a snapshot of its open frames' finished
        # children (set by the peer); they come back through result() and snapshot_taken().
        self.request_snapshot: Callable[[], None] | None = None
        self._taken = trio.Event()
        self.pending: list[bytes] = []
        self._runs: set[str] = set()
        self._now = trio.Event()
        self.bytes_pruned = 0
        self.failures = 0
        self.last_at: float | None = None
        # One flush at a time (the loop, a suspend): appends must not interleave with a prune
        # that rewrites the log.
        self._writing = trio.Lock()
        # A run's end was logged since the last prune: the next flush drops its records.
        self._ended_since_prune = False

    @property
    def enabled(self) -> bool:
        return self.store is not None

    def run(self, announce: m.RunAnnounce) -> None:
        """Log a run's descriptor once (a resume needs its plugin and arguments)."""
        if self.enabled and announce.info.run_id not in self._runs:
            self._runs.add(announce.info.run_id)
            self.pending.append(frame(announce))

    def ended(self, announce: m.RunAnnounce) -> None:
        """Log that a run is over (done or failed): a directory's unfinished runs are those
        without this record."""
        if self.enabled and announce.info.run_id in self._runs:
            self.pending.append(frame(announce))
            self._ended_since_prune = True

    def result(self, result: m.JobResult) -> None:
        if self.enabled and result.error is None and result.value is not None:
            self.pending.append(frame(result))

    def theft(self) -> None:
        """A job was stolen from this peer: with policy "tic", a forced checkpoint."""
        if self.cfg.policy == "tic":
            self._now.set()

    def snapshot_taken(self) -> None:
        """The compute side reported the results its snapshot logs (policy "tic")."""
        self._taken.set()

    def flush_soon(self) -> None:
        """Checkpoint now rather than at the next interval (a run is being suspended)."""
        self._now.set()

    async def loop(self) -> None:
        while True:
            with trio.move_on_after(self.cfg.interval_s):
                await self._now.wait()
            self._now = trio.Event()
            if self.cfg.policy == "tic" and self.request_snapshot is not None:
                # KAAPI's checkpoint of the process's part of the graph: what its open frames
                # have finished. A long leaf delays the compute side's answer: past the wait,
                # the snapshot's records go with the next batch.
                self._taken = trio.Event()
                self.request_snapshot()
                with trio.move_on_after(self.cfg.snapshot_wait_s):
                    await self._taken.wait()
            await self.flush()

    async def flush(self) -> None:
        async with self._writing:
            await self._append()
            if self._ended_since_prune and not self.pending and self.store is not None:
                # The end is on the disk: the run's records are dead weight now. A log only
                # grows with the runs that are not over.
                self._ended_since_prune = False
                try:
                    self.bytes_pruned += await self.store.prune(self.peer)
                except OSError as exc:
                    log.error("pruning the checkpoint log in %s failed: %s", self.store.where, exc)

    async def _append(self) -> None:
        if not self.pending or self.store is None:
            return
        batch, self.pending = self.pending, []
        try:
            written = await self.store.append(self.peer, batch)
        except OSError as exc:
            # A full or missing disk must not stop the computation: keep the records for the
            # next try and say so.
            self.failures += 1
            self.pending[:0] = batch
            log.error("checkpoint to %s failed: %s", self.store.where, exc)
            return
        self.counters.bytes_written += written
        self.counters.records_written += len(batch)
        self.last_at = trio.current_time()

    @property
    def bytes_written(self) -> int:
        return self.counters.bytes_written
