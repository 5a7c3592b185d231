"""Checkpoint logs: records round-trip; a torn tail or flipped bits cost only the records
they touch; compaction keeps no result below another one."""

from __future__ import annotations

import os
import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from satind.config import CheckpointConfig
from satind.net import codec
from satind.net import messages as m
from satind.node import checkpoint as writer
from satind.recovery import checkpoint as cp
from satind.work.jobs import path_from_indices

INFO = m.RunInfo("r1", "fib", "hash", ["30"], codec.encode_value((30,)), "n/0", 2, 0)


def _result(indices: list[int], value: int) -> m.JobResult:
    return m.JobResult("r1", path_from_indices(indices), codec.encode_value(value), None)


def _results(n: int) -> list[m.JobResult]:
    return [_result([i % 2, i // 2 % 2, i // 4, 7], i) for i in range(n)]


def _log(tmp_path: Path, results: list[m.JobResult]) -> Path:
    path = cp.log_path(tmp_path, "node/0")
    records = [cp.frame(m.RunAnnounce(INFO, "running")), *(cp.frame(r) for r in results)]
    assert cp.append(path, records[:3]) > 0
    cp.append(path, records[3:], fsync=False)
    return path


def test_records_round_trip(tmp_path: Path) -> None:
    results = _results(20)
    path = _log(tmp_path, results)
    assert path.name == "node_0.satlog"
    got = cp.load_directory(tmp_path)
    assert got.problems == [] and got.records == 21
    assert got.runs == {"r1": INFO}
    assert got.results["r1"] == {r.path: r for r in results}


def test_a_torn_tail_costs_only_the_last_record(tmp_path: Path) -> None:
    results = _results(10)
    path = _log(tmp_path, results)
    data = path.read_bytes()
    path.write_bytes(data[:-3])  # the crash came in the middle of the last write
    got = cp.load_directory(tmp_path)
    assert len(got.results["r1"]) == 9
    assert len(got.problems) == 1 and "torn record at the end" in got.problems[0]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=1, max_value=8))
def test_flipped_bits_and_truncation_never_stop_a_load(seed: int, flips: int) -> None:
    import tempfile

    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        results = _results(30)
        path = _log(Path(tmp), results)
        original = path.read_bytes()
        data = bytearray(original)
        for _ in range(flips):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        cut = rng.randrange(len(data) // 2, len(data) + 1)
        path.write_bytes(bytes(data[:cut]))
        got = cp.load_directory(Path(tmp))
        # Every result that survives is one that was written, bit for bit.
        written = {r.path: r for r in results}
        survived = got.results.get("r1", {})
        assert all(written[p] == r for p, r in survived.items())
        # Each flip costs at most the record it falls in (the reader skips to the next record
        # start); the cut costs the results that were not entirely before it.
        ends = [len(cp.frame(m.RunAnnounce(INFO, "running")))]
        for r in results:
            ends.append(ends[-1] + len(cp.frame(r)))
        whole_before_cut = sum(1 for end in ends[1:] if end <= cut)
        assert len(survived) >= whole_before_cut - flips
        # Damage is reported: a lost record, or a cut inside a record (a cut exactly between
        # records leaves a shorter, sound log).
        if len(survived) < whole_before_cut or cut not in (0, *ends):
            assert got.problems


def test_garbage_files_are_reported_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "x.satlog").write_bytes(b"\x00" * 100 + cp.MAGIC + b"\xff" * 20)
    _log(tmp_path, _results(3))
    got = cp.load_directory(tmp_path)
    assert len(got.results["r1"]) == 3
    assert any(p.startswith("x.satlog") for p in got.problems)


def test_compaction_keeps_no_result_below_another() -> None:
    parent = _result([1, 2], 5)
    below = [_result([1, 2, 0], 1), _result([1, 2, 3, 4], 2)]
    beside = _result([1, 3], 7)
    root_child = _result([0], 9)
    kept = cp.compact({r.path: r for r in [*below, parent, beside, root_child]})
    assert set(kept) == {parent.path, beside.path, root_child.path}


class _FlakyStore(writer.MemoryStore):
    """A store whose first append fails, as a full or unmounted disk would."""

    def __init__(self) -> None:
        super().__init__()
        self.fail = True

    async def append(self, peer: str, records: list[bytes]) -> int:
        if self.fail:
            self.fail = False
            raise OSError(28, "No space left on device")
        return await super().append(peer, records)


async def test_a_failed_write_keeps_the_records_for_the_next_checkpoint() -> None:
    store = _FlakyStore()
    checkpointer = writer.Checkpointer(CheckpointConfig(dir="shared"), "node/0", store)
    checkpointer.run(m.RunAnnounce(INFO, "running"))
    checkpointer.result(_result([1, 2], 12))
    await checkpointer.flush()
    assert checkpointer.failures == 1 and checkpointer.bytes_written == 0
    checkpointer.result(_result([3], 3))
    await checkpointer.flush()  # the next interval: everything goes, in order
    got = await store.load()
    assert got.unfinished() == {"r1": INFO} and got.problems == []
    assert sorted(r.value or b"" for r in got.results["r1"].values()) == sorted(
        [codec.encode_value(12), codec.encode_value(3)]
    )
    assert checkpointer.counters.records_written == 3


async def test_files_and_the_memory_store_hold_the_same_log(tmp_path: Path) -> None:
    stores: list[writer.LogStore] = [writer.FileStore(tmp_path, fsync=False), writer.MemoryStore()]
    for store in stores:
        checkpointer = writer.Checkpointer(CheckpointConfig(dir=str(tmp_path)), "node/0", store)
        checkpointer.run(m.RunAnnounce(INFO, "running"))
        for result in _results(10):
            checkpointer.result(result)
        await checkpointer.flush()
    on_disk, in_memory = [await store.load() for store in stores]
    assert on_disk.results == in_memory.results and on_disk.records == in_memory.records == 11


async def test_a_log_drops_the_records_of_a_run_once_its_end_is_logged(tmp_path: Path) -> None:
    other = m.RunInfo("r2", "fib", "hash", ["20"], codec.encode_value((20,)), "n/0", 2, 0)
    stores: list[writer.LogStore] = [writer.FileStore(tmp_path, fsync=False), writer.MemoryStore()]
    for store in stores:
        checkpointer = writer.Checkpointer(CheckpointConfig(dir=str(tmp_path)), "node/0", store)
        checkpointer.run(m.RunAnnounce(INFO, "running"))
        checkpointer.run(m.RunAnnounce(other, "running"))
        for result in _results(10):
            checkpointer.result(result)  # run r1
        checkpointer.result(m.JobResult("r2", path_from_indices([1]), codec.encode_value(5), None))
        await checkpointer.flush()
        before = await store.load()
        assert set(before.unfinished()) == {"r1", "r2"} and checkpointer.bytes_pruned == 0
        checkpointer.ended(m.RunAnnounce(INFO, "done"))
        await checkpointer.flush()
        after = await store.load()
        # r1 is over: its descriptor, results and end are gone; r2 is untouched.
        assert after.runs == {"r2": other} and after.ended == set()
        assert set(after.results) == {"r2"} and after.problems == []
        assert checkpointer.bytes_pruned > 0
    assert [p.name for p in os.scandir(tmp_path)] == ["node_0.satlog"]  # no temporary left


def test_pruning_keeps_every_intact_record_of_runs_not_over_and_drops_damage(
    tmp_path: Path,
) -> None:
    path = _log(tmp_path, _results(8))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40  # one damaged record in the middle
    path.write_bytes(bytes(data))
    damaged = cp.load_directory(tmp_path)
    assert damaged.problems
    assert cp.prune_file(path, fsync=False) > 0  # the damaged bytes go
    pruned = cp.load_directory(tmp_path)
    assert pruned.problems == [] and pruned.results == damaged.results
    assert pruned.unfinished() == {"r1": INFO}


def test_below_finds_what_lies_under_a_job_and_the_root_takes_everything() -> None:
    results = _results(8)
    contents = cp.LogContents(results={"r1": {r.path: r for r in results}})
    top = path_from_indices([1])
    assert {r.path for r in cp.below(contents, [("r1", top)])} == {
        r.path for r in results if r.path.startswith(top)
    }
    assert len(cp.below(contents, [("r1", b"")])) == 8  # a run's root: the empty path
    assert cp.below(contents, [("r2", b"")]) == []


def test_copies_give_results_but_not_runs_and_are_pruned_of_runs_heard_over(
    tmp_path: Path,
) -> None:
    # A copy of a peer that died before it logged the run's end.
    copy = cp.copy_path(tmp_path, "keeper/0", "dead/0")
    copy.parent.mkdir(parents=True)
    cp.append(copy, [cp.frame(m.RunAnnounce(INFO, "running")), cp.frame(_result([3], 3))])
    got = cp.load_directory(tmp_path)
    assert got.unfinished() == {}  # not a run to resume: only the keeper's own logs say so
    _log(tmp_path, [])  # the directory's own log knows the run: the copy's results count
    got = cp.load_directory(tmp_path)
    assert path_from_indices([3]) in got.results["r1"]
    assert cp.prune_file(copy, over_too=["r1"]) > 0
    assert cp.load([copy]).records == 0


async def test_an_iterative_runs_newest_barrier_is_logged_and_older_ones_pruned(
    tmp_path: Path,
) -> None:
    # Issue 34, point 3: a resume after the loss of every member starts an iterative or SPMD
    # run from its newest barrier in the logs; the log does not grow with the iterations.
    files = tmp_path / "files"
    stores: list[writer.LogStore] = [writer.FileStore(files, fsync=False), writer.MemoryStore()]
    cfg = CheckpointConfig(dir=str(files), superseded_barriers_max=3)
    for store in stores:
        checkpointer = writer.Checkpointer(cfg, "node/0", store)
        checkpointer.run(m.RunAnnounce(INFO, "running"))
        sizes = []
        for iteration in range(1, 11):
            checkpointer.barrier(m.Barrier("r1", 0, iteration, bytes(1000) + bytes([iteration])))
            await checkpointer.flush()
            sizes.append(len(await store.whole("node/0")))
            got = await store.load()
            assert got.barriers["r1"].iteration == iteration  # the newest, whatever was pruned
            assert got.barriers["r1"].state[-1] == iteration
        # Pruned after every 4th barrier: never more than 4 barriers' worth in the log.
        assert max(sizes) < 5 * 1000 + 200 and checkpointer.bytes_pruned > 0, sizes
        # A newer epoch (a new master) wins over a higher iteration of an older one.
        checkpointer.barrier(m.Barrier("r1", 1, 2, b"epoch 1"))
        await checkpointer.flush()
        assert (await store.load()).barriers["r1"].state == b"epoch 1"
        # The run's end drops its barriers with the rest of it.
        checkpointer.ended(m.RunAnnounce(INFO, "done"))
        await checkpointer.flush()
        assert (await store.load()).barriers == {}


def test_a_copy_gives_the_newest_barrier_of_a_run_the_directory_knows(tmp_path: Path) -> None:
    own = cp.log_path(tmp_path, "a/0")
    cp.append(
        own, [cp.frame(m.RunAnnounce(INFO, "running")), cp.frame(m.Barrier("r1", 0, 3, b"3"))]
    )
    copy = cp.copy_path(tmp_path, "a/0", "b/0")
    copy.parent.mkdir(parents=True)
    cp.append(copy, [cp.frame(m.Barrier("r1", 0, 5, b"5")), cp.frame(m.Barrier("r9", 0, 9, b"9"))])
    got = cp.load_directory(tmp_path)
    assert got.barriers["r1"].state == b"5"
    assert "r9" not in got.barriers  # a run no log of this directory describes


async def test_barriers_are_not_copied_to_the_members_keeping_a_copy() -> None:
    # Every member logs each barrier itself; one may be a whole SPMD grid.
    store = writer.MemoryStore()
    checkpointer = writer.Checkpointer(CheckpointConfig(dir="x"), "node/0", store)
    sent: list[m.Message] = []
    checkpointer.keepers = lambda: ("keeper/0",)
    checkpointer.post = lambda dest, msg: sent.append(msg)
    checkpointer.run(m.RunAnnounce(INFO, "running"))
    await checkpointer.flush()  # the keeper's first copy: the whole log, the descriptor
    sent.clear()
    checkpointer.barrier(m.Barrier("r1", 0, 1, bytes(5000)))
    result = _result([1], 7)
    checkpointer.result(result)
    await checkpointer.flush()
    assert (await store.load()).barriers["r1"].iteration == 1  # in the log
    [copy] = sent
    assert isinstance(copy, m.LogCopy) and not copy.reset
    assert copy.records == cp.frame(result)  # the result only
