"""The run history's SQLite store (node/history.py): records merged, queried, kept within
the retention, large results by reference, and files it must not use refused clearly."""

from __future__ import annotations

import dataclasses
import logging
import sqlite3
from pathlib import Path

import pytest

from satind.config import HistoryConfig
from satind.net import messages as m
from satind.node.history import Entry, HistoryError, HistoryStore, default_path


def record(run_id: str, ended: float, state: str = "done", **kw: object) -> m.RunRecord:
    base = m.RunRecord(
        run_id, "tree", ["3", "4"], "c0de", "alice", ["a/0@0"], state, 1.0, ended, 2.5
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def result(run_id: str, value: bytes = b"\x18\x2a") -> m.RunResult:
    return m.RunResult(run_id, value, None, 2.5, 4, {"jobs_run": 7})


def store(tmp_path: Path, **cfg: object) -> HistoryStore:
    s = HistoryStore(tmp_path / "h" / "history-a.sqlite", HistoryConfig(**cfg))  # type: ignore[arg-type]
    s.open()
    return s


def test_a_run_is_recorded_and_read_back_with_its_result(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.write(Entry(record("r1", 100.0, log=["a/0: hi"]), result("r1")), now=100.0)
    got = s.get("r1")
    assert got is not None and got.log == ["a/0: hi"] and got.masters == ["a/0@0"]
    assert got.result_bytes > 0 and got.result_ref == ""
    assert s.result("r1") == result("r1")
    assert s.get("nope") is None and s.result("nope") is None
    # A second open of the same file (a restarted peer) reads it as it was.
    again = HistoryStore(s.path, s.cfg)
    again.open()
    assert again.result("r1") == result("r1") and again.owners() == {"r1": "alice"}


def test_records_of_one_run_merge_masters_and_keep_the_longer_log(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.write(Entry(record("r1", 100.0, log=["x", "y"]), result("r1")), now=100.0)
    # A copy recorded by another peer (no log), after a take-over by b/0 at epoch 1.
    s.write(Entry(record("r1", 101.0, masters=["b/0@1"])), now=101.0)
    got = s.get("r1")
    assert got is not None
    assert got.masters == ["a/0@0", "b/0@1"] and got.log == ["x", "y"] and got.ended_at == 101.0
    assert s.result("r1") == result("r1")  # the record without one kept the result
    # The lines alone (a HistoryLog) add to a record, and never make one.
    stub = m.RunRecord("r1", "", [], "", "", [], "", 0.0, 0.0, 0.0, log=["x", "y", "z"])
    s.write(Entry(stub), now=102.0)
    s.write(Entry(dataclasses.replace(stub, run_id="r2")), now=102.0)
    got = s.get("r1")
    assert got is not None and got.log == ["x", "y", "z"] and got.plugin == "tree"
    assert s.get("r2") is None


def test_queries_filter_by_state_time_and_owner_newest_first(tmp_path: Path) -> None:
    s = store(tmp_path)
    for i, state in enumerate(["done", "failed", "cancelled", "done"]):
        owner = "bob" if i == 3 else "alice"
        s.write(Entry(record(f"r{i}", 100.0 + i, state, owner=owner, log=["l"])), now=110.0)
    assert [r.run_id for r in s.query()] == ["r3", "r2", "r1", "r0"]
    assert all(r.log == [] for r in s.query())  # the listing leaves the logs out
    assert [r.run_id for r in s.query(["failed", "cancelled"])] == ["r2", "r1"]
    assert [r.run_id for r in s.query(since=101.5)] == ["r3", "r2"]
    assert [r.run_id for r in s.query(limit=1)] == ["r3"]
    assert [r.run_id for r in s.query(owner="bob")] == ["r3"]


def test_retention_drops_the_oldest_and_the_expired_and_their_files(tmp_path: Path) -> None:
    s = store(tmp_path, keep_runs=3, keep_s=50.0, max_result_bytes=16)
    big = result("r0", b"\x58\x40" + b"x" * 64)  # a 64-byte value: kept in a file
    s.write(Entry(record("r0", 100.0), big), now=100.0)
    r0 = s.get("r0")
    assert r0 is not None and r0.result_ref.startswith("results/r0.cbor ")
    assert (s.path.parent / "results" / "r0.cbor").exists()
    assert s.result("r0") == big
    for i in range(1, 4):
        s.write(Entry(record(f"r{i}", 100.0 + i), result(f"r{i}")), now=104.0)
    # keep_runs = 3: r0, the oldest, went, and its file with it.
    assert [r.run_id for r in s.query()] == ["r3", "r2", "r1"]
    assert not (s.path.parent / "results" / "r0.cbor").exists()
    # keep_s = 50: at 152.5 whatever ended before 102.5 goes.
    s.write(Entry(record("r4", 152.0), result("r4")), now=152.5)
    assert [r.run_id for r in s.query()] == ["r4", "r3"]


def test_a_result_file_that_changed_is_not_returned(tmp_path: Path) -> None:
    s = store(tmp_path, max_result_bytes=16)
    s.write(Entry(record("r0", 100.0), result("r0", b"\x58\x40" + b"x" * 64)), now=100.0)
    path = s.path.parent / "results" / "r0.cbor"
    path.write_bytes(path.read_bytes()[:-1] + b"y")
    assert s.result("r0") is None


def test_a_result_reference_outside_the_results_directory_is_neither_read_nor_deleted(
    tmp_path: Path,
) -> None:
    """A row mended by hand (or a damaged page) naming another file: the store neither reads
    it as a result nor deletes it when the row expires."""
    s = store(tmp_path, keep_runs=1, max_result_bytes=16)
    s.write(Entry(record("r0", 100.0), result("r0", b"\x58\x40" + b"x" * 64)), now=100.0)
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    with sqlite3.connect(s.path) as db:
        db.execute("UPDATE runs SET result_ref = ? WHERE run_id = 'r0'", ("../precious.txt 7 x",))
    assert s.result("r0") is None
    s.write(Entry(record("r1", 101.0), result("r1")), now=101.0)  # r0 expires
    assert [r.run_id for r in s.query()] == ["r1"]
    assert victim.read_text() == "keep me"


def test_a_row_that_does_not_read_is_marked_and_logged_once_never_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    s = store(tmp_path, max_result_bytes=16)
    s.write(Entry(record("r1", 100.0, log=["a line"]), result("r1")), now=100.0)
    s.write(Entry(record("r2", 101.0, error="it failed"), result("r2")), now=101.0)
    s.write(Entry(record("r3", 102.0), result("r3", b"\x58\x40" + b"x" * 64)), now=102.0)
    with sqlite3.connect(s.path) as db:  # bad JSON, JSON of the wrong shape, text for numbers
        db.execute("UPDATE runs SET argv = '[\"3\"', log = '[[1, 2, 3]]' WHERE run_id = 'r1'")
        db.execute("UPDATE runs SET stats = '[]', ended_at = 'soon' WHERE run_id = 'r2'")
        db.execute("UPDATE runs SET result_ref = 'half a ref' WHERE run_id = 'r3'")
    with caplog.at_level(logging.WARNING, "satind.node.history"):
        listed = {r.run_id: r for r in s.query(since=0.0)}  # `satind runs`: every row
        again = s.query(since=0.0)
    assert set(listed) == {"r1", "r2", "r3"} and len(again) == 3
    r1, r2 = listed["r1"], listed["r2"]
    assert r1.argv == [] and r1.plugin == "tree" and r1.owner == "alice"
    assert r1.error == "damaged in the run history: argv, log unreadable"
    assert r2.stats == {} and r2.ended_at == 0.0
    assert r2.error == "it failed; damaged in the run history: ended_at, stats unreadable"
    assert listed["r3"].error == ""  # its reference is read only for its result
    got = s.get("r1")  # a run's page
    assert got is not None and got.log == [] and "damaged" in got.error
    assert s.result("r3") is None and s.result("r1") == result("r1")
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2 and all("shown without them" in line for line in said)  # once a run


def test_a_foreign_a_newer_or_a_corrupt_file_is_refused_clearly(tmp_path: Path) -> None:
    cfg = HistoryConfig()
    foreign = tmp_path / "foreign.sqlite"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE songs (title TEXT)")
    with pytest.raises(HistoryError, match=r"not a satind run history.*move it away"):
        HistoryStore(foreign, cfg).open()
    newer = store(tmp_path).path
    with sqlite3.connect(newer) as db:
        db.execute("PRAGMA user_version = 99")
    with pytest.raises(HistoryError, match="schema 99; this satind reads schema 1"):
        HistoryStore(newer, cfg).open()
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"this is no database at all" * 200)
    with pytest.raises(HistoryError, match=r"cannot be used as a run history.*corrupt"):
        HistoryStore(corrupt, cfg).open()
    unwritable = tmp_path / "file"
    unwritable.write_text("a file where a directory should be")
    with pytest.raises(HistoryError, match="cannot make the run history"):
        HistoryStore(unwritable / "h.sqlite", cfg).open()


def test_the_default_place_is_per_machine_under_xdg_state_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_path("m1") == tmp_path / "satind" / "history-m1.sqlite"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_path("m2") == tmp_path / "home" / ".local/state/satind/history-m2.sqlite"
