"""Checkpoint logs of finished results (satin-grid-programming-model §4.4; kaapi §3).

Orphan saving keeps a run alive while one peer survives. To survive the loss of every peer,
each peer appends the results recovery would need to its own **log** in a checkpoint
directory (a local disk or a shared mount), concurrently with computing and without any
synchronization between peers. A resume loads every log into the orphan table and respawns
the root: the results are found at spawn, exactly as orphans are. When only some peers are
lost, the survivors read the lost peers' logs (a shared directory, or the copies members keep:
``copy_path``) before they restart the jobs those took (core/logged.py). Every record is a
finished result or a run's descriptor: no policy logs pending tasks (their ancestors spawn them
again).

The file is a sequence of records, each

    MAGIC (2 bytes) | length (4 bytes, big-endian) | CRC-32 of the body (4 bytes) | body

where the body is one protocol message, encoded and validated by the wire codec (never
pickle): a ``Gossip`` carrying the ``RunAnnounce`` of a run (its descriptor: plugin,
arguments, code hash), a ``JobResult`` (run, path, encoded value), or a ``Barrier`` (an
iterative or SPMD run's state at its last barrier, which a resume starts the run from; only
the newest of a run counts, and a prune drops the others). Records are appended;
a crash may leave a torn record at the end, and a disk may flip bits. The reader checks every
record's length and checksum, skips what is damaged by searching for the next MAGIC, reports
what it skipped, and keeps everything else: a damaged log costs only the records it lost.

This module is the format only (no trio, no thread): the peer's writer, its stores and the
policies live in ``node/checkpoint.py``. Writes happen off the trio thread in batches; each
batch is flushed and, with ``fsync`` on (the default), fsynced before the next: a record
counts as checkpointed once its batch's fsync returned. Compaction drops results below a
result of an ancestor (the ancestor stands in for the whole subtree). Once a run's end is
logged, the peer prunes its log: the run's records are dropped by writing the log anew beside
the old one and renaming it over (a crash leaves one of the two whole), so a long-lived peer's
log holds only runs that are not over.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from satind.core.runs import FINAL
from satind.net import codec
from satind.net import messages as m

log = logging.getLogger(__name__)

MAGIC = b"\xc5\x1d"
HEADER = struct.Struct(">2sII")
SUFFIX = ".satlog"
# A record is one result or one run descriptor: the wire's frame cap bounds it as well.
MAX_RECORD = 64 * 1024 * 1024
# Records go to a member keeping a copy of the log in messages of at most this many bytes
# (under the wire's frame cap, net.max_frame_bytes, with room for the envelope).
MAX_COPY = 16 * 1024 * 1024


def log_path(directory: Path, peer: str) -> Path:
    """The log of ``peer`` in ``directory`` (peer names contain '/': NODE/INDEX)."""
    return directory / (peer.replace("/", "_") + SUFFIX)


# Copies of other peers' logs that this directory's peers keep (``[checkpoint] copies``): one
# folder per keeping peer, so that peers sharing a directory never append to one file.
COPIES = "copies"


def copy_path(directory: Path, holder: str, peer: str) -> Path:
    """Where ``holder`` keeps its copy of ``peer``'s log."""
    return log_path(directory / COPIES / holder.replace("/", "_"), peer)


def logs_of(directory: Path, peer: str) -> list[Path]:
    """Every log of ``peer`` this directory has: its own (a shared directory), and the copies
    peers that use this directory keep of it."""
    name = log_path(directory, peer).name
    return [p for p in [directory / name, *directory.glob(f"{COPIES}/*/{name}")] if p.exists()]


def below(contents: LogContents, wanted: Iterable[tuple[str, bytes]]) -> list[m.JobResult]:
    """The logged results at or below the jobs ``wanted`` (run id, path): what a restarted
    job would compute again."""
    tops = set(wanted)
    runs = {run_id for run_id, _ in tops}
    return at_or_below(
        (r for run_id in runs for r in contents.results.get(run_id, {}).values()), tops
    )


def at_or_below(
    results: Iterable[m.JobResult], wanted: Collection[tuple[str, bytes]]
) -> list[m.JobResult]:
    """The results at or below a wanted (run id, path). Paths are a prefix-free code: a byte
    prefix is an ancestor, so each result costs a set lookup per prefix."""
    tops = wanted if isinstance(wanted, set | frozenset) else set(wanted)
    return [
        r
        for r in results
        # From the empty prefix: a run's root has the empty path.
        if any((r.run_id, r.path[:cut]) in tops for cut in range(len(r.path) + 1))
    ]


Record = m.JobResult | m.RunAnnounce | m.Barrier


def frame(msg: Record) -> bytes:
    """One record, ready to append."""
    wire: m.Message = (
        msg if not isinstance(msg, m.RunAnnounce) else m.Gossip(m.Broadcasts([], [msg]))
    )
    body = codec.encode_message(wire)
    return HEADER.pack(MAGIC, len(body), zlib.crc32(body)) + body


def append(path: Path, records: list[bytes], fsync: bool = True) -> int:
    """Append records to a log (blocking: call it from a worker thread). Returns bytes
    written."""
    data = b"".join(records)
    with path.open("ab") as f:
        f.write(data)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    return len(data)


@dataclass
class LogContents:
    """What the logs of a checkpoint directory hold, and what could not be read."""

    runs: dict[str, m.RunInfo] = field(default_factory=dict)
    # Runs whose end (done or failed) was logged: nothing to resume.
    ended: set[str] = field(default_factory=set)
    # run id -> path -> result (compacted: no result below another one's path)
    results: dict[str, dict[bytes, m.JobResult]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    records: int = 0
    # run id -> its newest barrier (by epoch, then iteration), which a resume starts from
    barriers: dict[str, m.Barrier] = field(default_factory=dict)

    def add(self, msg: m.Message) -> None:
        if isinstance(msg, m.JobResult):
            if msg.error is None and msg.value is not None:
                self.results.setdefault(msg.run_id, {})[msg.path] = msg
        elif isinstance(msg, m.Barrier):
            self.add_barrier(msg)
        elif isinstance(msg, m.Gossip):
            for announce in msg.gossip.runs:
                if announce.state in FINAL:
                    self.ended.add(announce.info.run_id)
                    continue
                known = self.runs.get(announce.info.run_id)
                if known is None or announce.info.epoch >= known.epoch:
                    self.runs[announce.info.run_id] = announce.info

    def add_barrier(self, msg: m.Barrier) -> None:
        have = self.barriers.get(msg.run_id)
        if have is None or (msg.epoch, msg.iteration) > (have.epoch, have.iteration):
            self.barriers[msg.run_id] = msg

    def unfinished(self) -> dict[str, m.RunInfo]:
        """Runs the logs can resume: logged as running, and not logged as over."""
        return {k: v for k, v in self.runs.items() if k not in self.ended}


def read_records(data: bytes) -> Iterator[tuple[int, m.Message | str]]:
    """The records of one log, in order: (offset, message), or (offset, problem) for what was
    skipped. Never raises on bad data."""
    pos = 0
    end = len(data)
    while pos < end:
        if end - pos < HEADER.size:
            yield pos, f"torn record at the end ({end - pos} bytes)"
            return
        magic, length, crc = HEADER.unpack_from(data, pos)
        body_at = pos + HEADER.size
        problem = ""
        if magic != MAGIC:
            problem = "no record starts here"
        elif length > MAX_RECORD:
            problem = f"record length {length} over the cap"
        elif body_at + length > end:
            if data.find(MAGIC, pos + 1) < 0:
                yield pos, f"torn record at the end ({end - pos} of {HEADER.size + length} bytes)"
                return
            problem = "record length past the end of the log"  # a damaged length: resync
        elif zlib.crc32(data[body_at : body_at + length]) != crc:
            problem = "checksum mismatch"
        if not problem:
            try:
                msg = codec.decode_message(data[body_at : body_at + length])
            except codec.DecodeError as exc:
                problem = f"undecodable record: {exc}"
            else:
                yield pos, msg
                pos = body_at + length
                continue
        # Damaged: look for the next record start and go on from there.
        following = data.find(MAGIC, pos + 1)
        skipped_to = end if following < 0 else following
        yield pos, f"{problem}; skipped {skipped_to - pos} bytes"
        pos = skipped_to


def load(paths: Iterable[Path]) -> LogContents:
    """Read log files (unreadable files and damaged records are reported, never fatal),
    then compact."""

    def blobs() -> Iterator[tuple[str, bytes | OSError]]:
        for path in sorted(paths):
            try:
                yield path.name, path.read_bytes()
            except OSError as exc:
                yield path.name, exc

    return load_blobs(blobs())


def load_blobs(blobs: Iterable[tuple[str, bytes | OSError]]) -> LogContents:
    """Read logs given as (name, content or the error reading it), then compact."""
    out = LogContents()
    for name, data in blobs:
        if isinstance(data, OSError):
            out.problems.append(f"{name}: cannot read: {data}")
            continue
        for offset, item in read_records(data):
            if isinstance(item, str):
                out.problems.append(f"{name} at byte {offset}: {item}")
            else:
                out.records += 1
                out.add(item)
    for run_id, results in out.results.items():
        out.results[run_id] = compact(results)
    return out


def load_directory(directory: Path) -> LogContents:
    """Every log in a checkpoint directory, and the results in the copies of other peers'
    logs kept here (a machine whose disk is gone may have left a copy). Runs are taken from
    the directory's own logs only: a copy of a peer that died before a run ended never gets
    the end, and would show the run as unfinished for ever."""
    contents = load(directory.glob("*" + SUFFIX))
    copies = load(directory.glob(f"{COPIES}/*/*{SUFFIX}"))
    for run_id, results in copies.results.items():
        if run_id in contents.runs:
            merged = {**results, **contents.results.get(run_id, {})}
            contents.results[run_id] = compact(merged)
    for barrier in copies.barriers.values():
        if barrier.run_id in contents.runs:
            contents.add_barrier(barrier)
    contents.problems += copies.problems
    contents.records += copies.records
    return contents


def _run_of(msg: m.Message) -> tuple[str, bool]:
    """(run id, whether the record says the run is over) of a log record."""
    if isinstance(msg, m.JobResult | m.Barrier):
        return msg.run_id, False
    assert isinstance(msg, m.Gossip) and msg.gossip.runs
    announce = msg.gossip.runs[0]
    return announce.info.run_id, announce.state in FINAL


def prune_log(data: bytes, over_too: Collection[str] = ()) -> bytes:
    """One log without the records of the runs it says are over (nothing will resume them),
    or that ``over_too`` names (a copy whose peer died before it logged the end), without the
    barriers a later one of their run supersedes (a peer logs a barrier only when it is its
    run's newest, so the last in the log is), and without damaged bytes (a load would skip
    them anyway). Records stay in order."""
    read = [(pos, msg) for pos, msg in read_records(data) if not isinstance(msg, str)]
    records = [(pos, _run_of(msg)) for pos, msg in read]
    over = {run for _, (run, ended) in records if ended} | set(over_too)
    last_barrier = {msg.run_id: pos for pos, msg in read if isinstance(msg, m.Barrier)}
    superseded = {
        pos for pos, msg in read if isinstance(msg, m.Barrier) and last_barrier[msg.run_id] != pos
    }
    kept = []
    for pos, (run, _) in records:
        if run not in over and pos not in superseded:
            _, length, _ = HEADER.unpack_from(data, pos)
            kept.append(data[pos : pos + HEADER.size + length])
    return b"".join(kept)


def prune_file(path: Path, fsync: bool = True, over_too: Collection[str] = ()) -> int:
    """Prune a log file in place (blocking: call it from a worker thread): the pruned log is
    written beside it and renamed over it, so a crash leaves the old or the new log whole.
    Returns the bytes it dropped."""
    data = path.read_bytes()
    pruned = prune_log(data, over_too)
    if len(pruned) == len(data):
        return 0
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as f:
        f.write(pruned)
        f.flush()
        if fsync:
            os.fsync(f.fileno())
    os.replace(tmp, path)
    return len(data) - len(pruned)


def compact(results: dict[bytes, m.JobResult]) -> dict[bytes, m.JobResult]:
    """Drop the results that lie below another result's path: the ancestor's result stands
    in for its whole subtree, so they would never be looked up."""
    kept: dict[bytes, m.JobResult] = {}
    # Shorter paths first, so that an ancestor is kept before its subtree is looked at.
    for path in sorted(results, key=len):
        if not _below_kept(path, kept):
            kept[path] = results[path]
    return kept


def _below_kept(path: bytes, kept: dict[bytes, m.JobResult]) -> bool:
    """Whether a proper ancestor of ``path`` is kept. A byte prefix that is a kept path is an
    ancestor (paths are a prefix-free code, jobs.is_ancestor), so a dict lookup per prefix
    keeps compaction O(N x path length) instead of O(N^2)."""
    return any(path[:cut] in kept for cut in range(len(path)))


__all__ = [
    "COPIES",
    "MAX_COPY",
    "LogContents",
    "append",
    "at_or_below",
    "below",
    "compact",
    "copy_path",
    "frame",
    "load",
    "load_blobs",
    "load_directory",
    "log_path",
    "logs_of",
    "prune_file",
    "prune_log",
    "read_records",
]
