"""The run history: every run a machine's peers mastered or kept a result copy of, in one
SQLite file per machine that outlives the peers (docs/operations.md, "Run history").

A run's master records it when it ends; the members that keep copies of its result
(``run.result_copies``) record it too, so that losing a machine loses no history. The
record holds what `satind runs` lists (plugin, arguments, owner, masters, state, times,
statistics, the tail of the output) and the result for `satind result` after a restart: in
the database up to ``history.max_result_bytes``, else in a file beside it that the row names
(``results/RUN_ID.cbor``, with its size and SHA-256).

The store (``HistoryStore``) is synchronous: a connection per call, so that no connection
is shared between threads, and SQLite's write-ahead log lets the machine's peers write one
file at once. A peer's ``Recorder`` calls it in worker threads: writes through one bounded
queue to one task, in the order they came (a copy's log tail after the copy itself), so the
trio thread never waits for the disk. A write that fails is logged, never raised: history
is worth less than the peer's work. What a peer records, and how it answers, is
node/recorder.py.

The file is checked when a peer opens it: one of another program (its ``application_id``),
of a newer satind (its ``user_version``), or not a database at all is refused with a
``HistoryError`` that says which file and what to do; the peer then runs without history.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from satind.config import Config, HistoryConfig
from satind.net import codec
from satind.net import messages as m

if TYPE_CHECKING:
    import sqlite3

# "SATH": what marks the file as a satind run history (PRAGMA application_id).
APPLICATION_ID = 0x53415448
# The schema's version (PRAGMA user_version). A newer satind that changes the schema bumps it
# and migrates older files on open; an older satind refuses a newer file.
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY,
    plugin TEXT NOT NULL,
    argv TEXT NOT NULL,          -- JSON list
    code_hash TEXT NOT NULL,
    owner TEXT NOT NULL,
    masters TEXT NOT NULL,       -- JSON list of "NAME@EPOCH"
    state TEXT NOT NULL,
    started_at REAL NOT NULL,    -- wall-clock seconds since the Unix epoch
    ended_at REAL NOT NULL,
    elapsed_s REAL NOT NULL,
    check_verdict TEXT NOT NULL,
    error TEXT NOT NULL,
    stats TEXT NOT NULL,         -- JSON object
    log TEXT NOT NULL,           -- JSON list of [seconds since the epoch, line]
    result BLOB,                 -- the RunResult's CBOR, when small enough
    result_bytes INTEGER NOT NULL,
    result_ref TEXT NOT NULL,    -- else "results/RUN_ID.cbor SIZE SHA256"
    recorded_by TEXT NOT NULL
);
CREATE INDEX runs_by_end ON runs (ended_at);
"""
T = TypeVar("T")

log = logging.getLogger(__name__)

_COLUMNS = (
    "run_id, plugin, argv, code_hash, owner, masters, state, started_at, ended_at, "
    "elapsed_s, check_verdict, error, stats, log, result_bytes, result_ref, recorded_by"
)


class HistoryError(Exception):
    """The history file cannot be used (foreign, newer, corrupt, unwritable)."""


@dataclass(frozen=True)
class Entry:
    """What is recorded of one run: its record and its result (None: the record only adds
    to one already there, such as a log tail that came apart)."""

    record: m.RunRecord
    result: m.RunResult | None = None


def state_dir() -> Path:
    """$XDG_STATE_HOME/satind: XDG's place for state that outlives a process (~/.local/state
    when unset). A daemon keeps its run history and remembered members there by default."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "satind"


def default_path(name: str) -> Path:
    """$XDG_STATE_HOME/satind/history-NAME.sqlite."""
    return state_dir() / f"history-{name}.sqlite"


class HistoryStore:
    """One machine's run history file."""

    def __init__(self, path: Path, cfg: HistoryConfig) -> None:
        self.path = path
        self.cfg = cfg
        self.results = path.parent / "results"
        # The runs whose damaged record was logged: once each, not at every `satind runs`.
        self._said: set[str] = set()

    # -- opening -------------------------------------------------------------------------

    def open(self) -> None:
        """Make the file (and its directory) if it is missing, else check it is a satind
        history of this schema.

        Raises:
            HistoryError: it is not, or cannot be read or written.
        """
        import sqlite3  # here: a peer without a history does not load it

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as db:
                # The machine's peers open the file at once: one makes it, under the write
                # lock, and the others see it whole.
                db.execute("BEGIN IMMEDIATE")
                app = db.execute("PRAGMA application_id").fetchone()[0]
                version = db.execute("PRAGMA user_version").fetchone()[0]
                tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                if app == 0 and version == 0 and tables == 0:
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            db.execute(statement)
                    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                db.execute("COMMIT")
                if app == 0 and version == 0 and tables == 0:
                    return
                if app != APPLICATION_ID:
                    raise HistoryError(
                        f"{self.path} is not a satind run history (an SQLite file of another "
                        "program): move it away, or set [history] path to another file"
                    )
                if version != SCHEMA_VERSION:
                    raise HistoryError(
                        f"{self.path} is a run history of schema {version}; this satind "
                        f"reads schema {SCHEMA_VERSION} (a newer satind wrote it): use that "
                        "satind, or set [history] path to another file"
                    )
                db.execute("SELECT run_id FROM runs LIMIT 1").fetchall()
        except sqlite3.DatabaseError as exc:
            raise HistoryError(
                f"{self.path} cannot be used as a run history ({exc}): if it is corrupt, "
                "move it away (a new one is made), or set [history] path to another file"
            ) from None
        except OSError as exc:
            raise HistoryError(f"cannot make the run history {self.path}: {exc}") from None

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        import sqlite3  # here: a peer without a history does not load it

        db = sqlite3.connect(self.path, timeout=self.cfg.busy_timeout_s, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            yield db
        finally:
            db.close()

    # -- writing -------------------------------------------------------------------------

    def write(self, entry: Entry, now: float | None = None) -> None:
        """Record a run, merged with what is there: the masters seen by either, the longer
        log, a result if either has one; the rest from the newer record. Then drop what is
        past the retention.

        Raises:
            HistoryError: the database failed (full disk, locked past busy_timeout_s).
        """
        import sqlite3  # here: a peer without a history does not load it

        try:
            with self._connect() as db:
                db.execute("BEGIN IMMEDIATE")
                old = self._row(db, entry.record.run_id)
                if old is None and not entry.record.plugin:
                    db.execute("COMMIT")  # lines alone add to a record, never make one
                    return
                record, blob, size, ref = self._merged(db, entry, old)
                db.execute(
                    f"INSERT OR REPLACE INTO runs ({_COLUMNS}, result) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (*_values(replace(record, result_bytes=size, result_ref=ref)), blob),
                )
                self._prune(db, time.time() if now is None else now)
                db.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            raise HistoryError(f"cannot write the run history {self.path}: {exc}") from None

    def _merged(
        self, db: sqlite3.Connection, entry: Entry, old: m.RunRecord | None
    ) -> tuple[m.RunRecord, bytes | None, int, str]:
        record = entry.record
        if old is not None:
            masters = list(dict.fromkeys([*old.masters, *record.masters]))
            longer = record if len(record.log) >= len(old.log) else old
            base = record if record.plugin else old
            record = replace(base, masters=masters, log=longer.log, log_times=longer.log_times)
        if entry.result is None:
            if old is None:
                return record, None, 0, ""
            blob = db.execute(
                "SELECT result FROM runs WHERE run_id = ?", (record.run_id,)
            ).fetchone()[0]
            return record, blob, old.result_bytes, old.result_ref
        data = codec.encode_message(entry.result)
        if len(data) <= self.cfg.max_result_bytes:
            return record, data, len(data), ""
        self.results.mkdir(parents=True, exist_ok=True)
        name = f"{_safe(record.run_id)}.cbor"
        tmp = self.results / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, self.results / name)
        digest = hashlib.sha256(data).hexdigest()
        return record, None, len(data), f"results/{name} {len(data)} {digest}"

    def _prune(self, db: sqlite3.Connection, now: float) -> None:
        cutoff = now - self.cfg.keep_s
        gone = db.execute(
            "SELECT run_id, result_ref FROM runs WHERE ended_at < ? OR run_id NOT IN "
            "(SELECT run_id FROM runs ORDER BY ended_at DESC LIMIT ?)",
            (cutoff, self.cfg.keep_runs),
        ).fetchall()
        for run_id, ref in gone:
            db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
            where = self._result_file(ref)
            if where is not None:
                where.unlink(missing_ok=True)

    def _result_file(self, ref: object) -> Path | None:
        """The file a row's ``result_ref`` names, when it lies in this store's results
        directory; None for none, or for one elsewhere (a row mended by hand, a damaged page:
        a store deletes and reads only its own files)."""
        if not ref:
            return None
        where = (self.path.parent / str(ref).split(" ")[0]).resolve()
        return where if where.parent == self.results.resolve() else None

    # -- reading -------------------------------------------------------------------------

    def get(self, run_id: str) -> m.RunRecord | None:
        with self._reading() as db:
            return self._row(db, run_id)

    def result(self, run_id: str) -> m.RunResult | None:
        """A run's result as recorded, or None (not recorded, or its file is gone or does
        not match its checksum)."""
        with self._reading() as db:
            row = db.execute(
                "SELECT result, result_ref FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
        if row is None:
            return None
        blob, ref = row
        if blob is None and ref:
            try:
                _, size, digest = str(ref).split(" ")
                where = self._result_file(ref)
                if where is None:
                    return None
                blob = where.read_bytes()
                if len(blob) != int(size) or hashlib.sha256(blob).hexdigest() != digest:
                    return None
            except (OSError, ValueError):  # no file, or a reference that does not read
                return None
        if not isinstance(blob, bytes):
            return None
        try:
            msg = codec.decode_message(blob)
        except codec.DecodeError:
            return None
        return msg if isinstance(msg, m.RunResult) else None

    def query(
        self, states: Sequence[str] = (), since: float = 0.0, limit: int = 20, owner: str = ""
    ) -> list[m.RunRecord]:
        """The newest ``limit`` runs that ended at or after ``since``, in ``states`` (empty:
        any), submitted by ``owner`` (empty: anyone), without their logs."""
        where, args = ["ended_at >= ?"], list[object]([since])
        if states:
            where.append(f"state IN ({', '.join('?' * len(states))})")
            args += list(states)
        if owner:
            where.append("owner = ?")
            args.append(owner)
        with self._reading() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM runs WHERE {' AND '.join(where)} "
                "ORDER BY ended_at DESC LIMIT ?",
                (*args, limit),
            ).fetchall()
        return [replace(_record(row, self._said), log=[], log_times=[]) for row in rows]

    def owners(self) -> dict[str, str]:
        """Who submitted each recorded run (the permissions of a run known only here)."""
        with self._reading() as db:
            return dict(db.execute("SELECT run_id, owner FROM runs").fetchall())

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        import sqlite3  # here: a peer without a history does not load it

        try:
            with self._connect() as db:
                yield db
        except sqlite3.Error as exc:
            raise HistoryError(f"cannot read the run history {self.path}: {exc}") from None

    def _row(self, db: sqlite3.Connection, run_id: str) -> m.RunRecord | None:
        row = db.execute(f"SELECT {_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else _record(row, self._said)


def _safe(run_id: str) -> str:
    """A run id as a file name (ids are made by peers, but a copy comes from a member)."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)[:100]


def _values(r: m.RunRecord) -> tuple[object, ...]:
    return (
        r.run_id,
        r.plugin,
        json.dumps(r.argv),
        r.code_hash,
        r.owner,
        json.dumps(r.masters),
        r.state,
        r.started_at,
        r.ended_at,
        r.elapsed_s,
        r.check,
        r.error,
        json.dumps(r.stats),
        json.dumps([[at, line] for at, line in zip(_times(r), r.log, strict=True)]),
        r.result_bytes,
        r.result_ref,
        r.recorded_by,
    )


def _times(r: m.RunRecord) -> list[float]:
    """A record's line times, one per line (0.0 where not known)."""
    return (list(r.log_times) + [0.0] * len(r.log))[: len(r.log)]


class _Reading:
    """One row's columns read one by one: a column that does not read (bad JSON, a text
    where a number belongs: a file mended by hand, a disk that lost a page) gives its empty
    value and is named in ``damaged``, so that one row cannot fail a whole listing."""

    def __init__(self) -> None:
        self.damaged: list[str] = []

    def json(self, name: str, value: object, kind: type[list[Any]] | type[dict[str, Any]]) -> Any:
        try:
            got = json.loads(str(value))
        except ValueError:
            got = None
        if not isinstance(got, kind):
            self.damaged.append(name)
            return kind()
        return got

    def number(self, name: str, value: object) -> float:
        try:
            return float(str(value))
        except ValueError:
            self.damaged.append(name)
            return 0.0

    def log(self, value: object) -> tuple[list[str], list[float]]:
        pairs = self.json("log", value, list)
        try:
            return [str(line) for _, line in pairs], [float(at) for at, _ in pairs]
        except (TypeError, ValueError):
            self.damaged.append("log")
            return [], []


def _record(row: tuple[object, ...], said: set[str]) -> m.RunRecord:
    """A row as a record; a row with columns that do not read is marked in its ``error``,
    and logged unless its run is in ``said`` (then added: once per run and store)."""
    (run_id, plugin, argv, code_hash, owner, masters, state, started, ended, elapsed) = row[:10]
    (check, error, stats, log_column, size, ref, by) = row[10:]
    read = _Reading()  # in the columns' order, so that ``damaged`` names them in it
    arguments = [str(a) for a in read.json("argv", argv, list)]
    masters_seen = [str(a) for a in read.json("masters", masters, list)]
    started_at, ended_at = read.number("started_at", started), read.number("ended_at", ended)
    elapsed_s = read.number("elapsed_s", elapsed)
    statistics = dict(read.json("stats", stats, dict))
    lines, times = read.log(log_column)
    record = m.RunRecord(
        run_id=str(run_id),
        plugin=str(plugin),
        argv=arguments,
        code_hash=str(code_hash),
        owner=str(owner),
        masters=masters_seen,
        state=str(state),
        started_at=started_at,
        ended_at=ended_at,
        elapsed_s=elapsed_s,
        check=str(check),
        error=str(error),
        stats=statistics,
        log=lines,
        log_times=times,
        result_bytes=int(read.number("result_bytes", size)),
        result_ref=str(ref),
        recorded_by=str(by),
    )
    if not read.damaged:
        return record
    what = f"damaged in the run history: {', '.join(read.damaged)} unreadable"
    if record.run_id not in said:
        said.add(record.run_id)
        log.warning("run %s: its record is %s (shown without them)", record.run_id, what)
    return replace(record, error=f"{record.error}; {what}" if record.error else what)


class Recorder:
    """One peer's way to its machine's history file (or none: ``error`` says why)."""

    def __init__(self, cfg: Config) -> None:
        h = cfg.history
        self.store = HistoryStore(Path(h.path), h) if h.enabled and h.path else None
        self.error = "" if self.store is not None else "the run history is off on this peer"
        self._send, self._receive = trio.open_memory_channel[Entry](h.max_pending)
        self.dropped = 0

    async def open(self) -> dict[str, str]:
        """Check the file (a HistoryError leaves the peer without history, logged, and said
        in every answer about it); the owners of the runs recorded there."""
        store = self.store
        if store is None:
            return {}
        try:
            await trio.to_thread.run_sync(store.open)
            return await trio.to_thread.run_sync(store.owners)
        except HistoryError as exc:
            self.store, self.error = None, str(exc)
            log.error("no run history: %s", exc)
            return {}

    def add(self, entry: Entry) -> None:
        if self.store is None:
            return
        try:
            self._send.send_nowait(entry)
        except trio.WouldBlock:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 100 == 0:
                log.warning(
                    "run history: %d records dropped, the disk is slow (history.max_pending)",
                    self.dropped,
                )

    async def run(self) -> None:
        """Write what comes, in order, until the peer stops."""
        async for entry in self._receive:
            store = self.store
            if store is None:
                continue
            try:
                await trio.to_thread.run_sync(store.write, entry)
            except HistoryError as exc:
                log.warning("run %s not recorded: %s", entry.record.run_id, exc)

    async def read(self, fn: Callable[..., T], *args: object) -> T:
        """One of the store's readers, in a worker thread.

        Raises:
            HistoryError: no history here, or the file failed.
        """
        if self.store is None:
            raise HistoryError(self.error)
        return await trio.to_thread.run_sync(fn, *args)
