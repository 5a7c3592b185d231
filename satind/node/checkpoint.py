"""The peer's checkpoint writer (satin-grid-programming-model §4.4; kaapi §3): the records to
append to its log, the loop that appends them off the trio thread every ``interval_s`` (and at
every theft with policy "tic"), and where logs go (``LogStore``: files in a directory, or the
simulator's shared memory). The log format is ``recovery/checkpoint.py``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Protocol, TypeVar

import trio

from satind.config import CheckpointConfig
from satind.core.model.checkpoint import CheckpointCounters
from satind.net import messages as m
from satind.recovery.checkpoint import (
    COPIES,
    MAX_COPY,
    SUFFIX,
    LogContents,
    append,
    copy_path,
    frame,
    load,
    load_blobs,
    load_directory,
    log_path,
    logs_of,
    prune_file,
    prune_log,
)

log = logging.getLogger(__name__)

K = TypeVar("K")


class LogStore(Protocol):
    """Where a peer's log goes and where a resume reads every peer's log from."""

    where: str

    async def append(self, peer: str, records: list[bytes]) -> int:
        """Append records to ``peer``'s log; returns bytes written. Raises OSError."""
        ...

    async def load(self) -> LogContents: ...

    async def prune(self, peer: str, ended: Collection[str] = ()) -> int:
        """Drop the records of ended runs from ``peer``'s log, and from the copies it keeps of
        other peers' logs those of the runs ``ended`` names too (a copy's peer may have died
        before it logged the end); returns bytes dropped."""
        ...

    async def read(self, peer: str) -> tuple[LogContents, bool]:
        """Every log here (own logs, copies of others'), and whether ``peer``'s is among them
        (a shared directory, or a copy of it). A result is the same wherever it was logged:
        the logs of other lost members, or of live ones, serve as well."""
        ...

    async def whole(self, peer: str) -> bytes:
        """``peer``'s own log as it is (for a member that starts keeping a copy)."""
        ...

    async def keep_copy(self, holder: str, peer: str, records: bytes, reset: bool) -> int:
        """Append to (``reset``: replace) ``holder``'s copy of ``peer``'s log."""
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

    async def prune(self, peer: str, ended: Collection[str] = ()) -> int:
        def prune_all() -> int:
            dropped = 0
            own = log_path(self.directory, peer)
            if own.exists():
                dropped += prune_file(own, self.fsync)
            for path in (self.directory / COPIES / peer.replace("/", "_")).glob("*" + SUFFIX):
                dropped += prune_file(path, self.fsync, ended)
            return dropped

        return await trio.to_thread.run_sync(prune_all)

    async def read(self, peer: str) -> tuple[LogContents, bool]:
        def read_all() -> tuple[LogContents, bool]:
            # Copies too, runs and all: only results are taken from what is read here.
            has = bool(logs_of(self.directory, peer))
            own = self.directory.glob("*" + SUFFIX)
            return load([*own, *self.directory.glob(f"{COPIES}/*/*{SUFFIX}")]), has

        return await trio.to_thread.run_sync(read_all)

    async def whole(self, peer: str) -> bytes:
        path = log_path(self.directory, peer)
        return await trio.to_thread.run_sync(lambda: path.read_bytes() if path.exists() else b"")

    async def keep_copy(self, holder: str, peer: str, records: bytes, reset: bool) -> int:
        path = copy_path(self.directory, holder, peer)

        def write() -> int:
            path.parent.mkdir(parents=True, exist_ok=True)
            if reset:
                path.unlink(missing_ok=True)
            return append(path, [records], self.fsync)

        return await trio.to_thread.run_sync(write)


class MemoryStore:
    """Logs in memory, shared by every peer given the same store: the simulator's checkpoint
    mount. Appends are synchronous, so a simulation stays deterministic under the mock
    clock (a thread would let virtual time jump while it runs)."""

    def __init__(self, where: str = "memory") -> None:
        self.where = where
        self.logs: dict[str, bytearray] = {}
        # (holder, peer) -> holder's copy of peer's log
        self.copies: dict[tuple[str, str], bytearray] = {}

    async def append(self, peer: str, records: list[bytes]) -> int:
        data = b"".join(records)
        self.logs.setdefault(peer, bytearray()).extend(data)
        await trio.lowlevel.checkpoint()
        return len(data)

    async def load(self) -> LogContents:
        await trio.lowlevel.checkpoint()
        return load_blobs((name, bytes(self.logs[name])) for name in sorted(self.logs))

    async def prune(self, peer: str, ended: Collection[str] = ()) -> int:
        await trio.lowlevel.checkpoint()
        dropped = _prune_in(self.logs, peer)
        for key in [key for key in self.copies if key[0] == peer]:
            dropped += _prune_in(self.copies, key, ended)
        return dropped

    async def read(self, peer: str) -> tuple[LogContents, bool]:
        await trio.lowlevel.checkpoint()
        has = peer in self.logs or any(p == peer for _, p in self.copies)
        blobs = [(name, bytes(self.logs[name])) for name in sorted(self.logs)]
        blobs += [(f"{h}:{p}", bytes(d)) for (h, p), d in sorted(self.copies.items())]
        return load_blobs(blobs), has

    async def whole(self, peer: str) -> bytes:
        await trio.lowlevel.checkpoint()
        return bytes(self.logs.get(peer, b""))

    async def keep_copy(self, holder: str, peer: str, records: bytes, reset: bool) -> int:
        await trio.lowlevel.checkpoint()
        if reset:
            self.copies.pop((holder, peer), None)
        self.copies.setdefault((holder, peer), bytearray()).extend(records)
        return len(records)


def _prune_in(logs: dict[K, bytearray], key: K, over_too: Collection[str] = ()) -> int:
    data = bytes(logs.get(key, b""))
    pruned = prune_log(data, over_too)
    logs[key] = bytearray(pruned)
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
        # Barrier records to append: apart, because they are not copied to the members
        # keeping a copy of the log (every member logs each barrier itself, and one may be
        # a whole SPMD grid).
        self.pending_barriers: list[bytes] = []
        self._runs: set[str] = set()
        self._now = trio.Event()
        self.bytes_pruned = 0
        self.failures = 0
        self.last_at: float | None = None
        # One flush at a time (the loop, a suspend): appends must not interleave with a prune
        # that rewrites the log.
        self._writing = trio.Lock()
        # A run's end was logged since the last prune, or a run's old barriers piled up: the
        # next flush drops their records.
        self._prune_due = False
        # Barriers of each run in the log since its last prune (``barrier``).
        self._barriers: dict[str, int] = {}
        # Copies of the log on other members ([checkpoint] copies): who should keep one now
        # (set by the peer from its members: core/logged.keepers), how to send them records,
        # and who was sent the whole log so far.
        # Runs whose end this peer heard since the last prune (copies are pruned of them),
        # and the copies of other peers' logs received, kept in order of arrival.
        self._ended_runs: set[str] = set()
        self._copies_in: deque[tuple[str, bytes, bool]] = deque()
        self._keeping = False
        self.keepers: Callable[[], tuple[str, ...]] | None = None
        self.post: Callable[[str, m.Message], object] | None = None
        self.spawn: Callable[..., None] | None = None
        self._copied_to: tuple[str, ...] = ()

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
        without this record. Every run's end, logged or not, prunes the copies kept here."""
        if not self.enabled:
            return
        self._ended_runs.add(announce.info.run_id)
        self._barriers.pop(announce.info.run_id, None)
        self._prune_due = True
        if announce.info.run_id in self._runs:
            self.pending.append(frame(announce))

    def barrier(self, barrier: m.Barrier) -> None:
        """Log an iterative or SPMD run's newest barrier (what a resume starts it from).
        Older ones of the run are dead weight: past ``superseded_barriers_max`` of them the
        next flush rewrites the log without them."""
        if not self.enabled:
            return
        self.pending_barriers.append(frame(barrier))
        logged = self._barriers.get(barrier.run_id, 0) + 1
        self._barriers[barrier.run_id] = logged
        if logged > self.cfg.superseded_barriers_max:
            self._barriers[barrier.run_id] = 1
            self._prune_due = True

    def result(self, result: m.JobResult) -> None:
        if self.enabled and result.error is None and result.value is not None:
            self.pending.append(frame(result))
            if self.cfg.policy == "sel":
                # Systematic event logging: each completion is logged as it happens, not at
                # the next interval. What finishes while a batch is being written goes with
                # the next one (a group commit: one fsync per batch, not per result).
                self._now.set()

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
                # After KAAPI's theft-induced checkpoint: what its open frames have finished
                # (results, not pending tasks: docs/operations.md). A long leaf delays the
                # compute side's answer: past the wait, the snapshot's records go with the
                # next batch.
                self._taken = trio.Event()
                self.request_snapshot()
                with trio.move_on_after(self.cfg.snapshot_wait_s):
                    await self._taken.wait()
            await self.flush()

    async def flush(self) -> None:
        async with self._writing:
            await self._append()
            idle = not self.pending and not self.pending_barriers
            if self._prune_due and idle and self.store is not None:
                # The end (or the newest barrier) is on the disk: the run's records (or its
                # older barriers) are dead weight now. A log only grows with the runs that
                # are not over.
                self._prune_due = False
                ended, self._ended_runs = self._ended_runs, set()
                try:
                    pruned = await self.store.prune(self.peer, ended)
                except OSError as exc:
                    log.error("pruning the checkpoint log in %s failed: %s", self.store.where, exc)
                else:
                    self.bytes_pruned += pruned
                    if pruned and ended:
                        # The keepers' copies shrink too (a prune of old barriers only
                        # changes nothing there: barriers are not copied).
                        await self._copy([], whole=True)

    async def _append(self) -> None:
        if not (self.pending or self.pending_barriers) or self.store is None:
            return
        batch, self.pending = self.pending, []
        barriers, self.pending_barriers = self.pending_barriers, []
        try:
            written = await self.store.append(self.peer, batch + barriers)
        except OSError as exc:
            # A full or missing disk must not stop the computation: keep the records for the
            # next try and say so.
            self.failures += 1
            self.pending[:0] = batch
            self.pending_barriers[:0] = barriers
            log.error("checkpoint to %s failed: %s", self.store.where, exc)
            return
        self.counters.bytes_written += written
        self.counters.records_written += len(batch) + len(barriers)
        self.last_at = trio.current_time()
        await self._copy(batch)

    def keep(self, peer: str, records: bytes, reset: bool) -> None:
        """Keep records of ``peer``'s log (a ``LogCopy``): appended in the order they came,
        one write at a time and never during a prune (a reset landing after later appends
        would wipe them)."""
        if self.store is None:
            return
        self._copies_in.append((peer, records, reset))
        if not self._keeping and self.spawn is not None:
            self._keeping = True
            self.spawn(self._keep_in_order)

    async def _keep_in_order(self) -> None:
        assert self.store is not None
        try:
            while self._copies_in:
                peer, records, reset = self._copies_in.popleft()
                async with self._writing:
                    try:
                        await self.store.keep_copy(self.peer, peer, records, reset)
                    except OSError as exc:
                        log.error("keeping a copy of %s's checkpoint log failed: %s", peer, exc)
        finally:
            self._keeping = False

    async def _copy(self, batch: list[bytes], whole: bool = False) -> None:
        """Send what was appended to the members keeping a copy of the log; a new keeper
        (or every keeper, ``whole``: the log was pruned) gets the whole log instead."""
        if self.keepers is None or self.post is None or self.store is None:
            return
        keepers = self.keepers()
        fresh = keepers if whole else tuple(k for k in keepers if k not in self._copied_to)
        self._copied_to = keepers
        if fresh:
            try:
                data = await self.store.whole(self.peer)
            except OSError as exc:
                log.error("reading the checkpoint log to copy it failed: %s", exc)
                data = b""
            if len(data) > self.cfg.max_copy_bytes:
                # Sent whole it would crowd out the connection's steals and results (the
                # outbox is bounded): the new keepers get what is appended from now on.
                log.warning(
                    "checkpoint log of %d bytes not copied whole to %s "
                    "([checkpoint] max_copy_bytes = %d)",
                    len(data),
                    ", ".join(fresh),
                    self.cfg.max_copy_bytes,
                )
                fresh = ()
            for keeper in fresh:
                self._send(keeper, data, reset=True)
        if batch:
            data = b"".join(batch)
            for keeper in keepers:
                if keeper not in fresh:
                    self._send(keeper, data, reset=False)

    def _send(self, keeper: str, data: bytes, reset: bool) -> None:
        assert self.post is not None
        # In pieces under the wire's frame cap; appended in order, they make the log again.
        for at in range(0, max(len(data), 1), MAX_COPY):
            self.post(keeper, m.LogCopy(self.peer, data[at : at + MAX_COPY], reset and at == 0))
        self.counters.bytes_copied += len(data)

    @property
    def bytes_written(self) -> int:
        return self.counters.bytes_written
