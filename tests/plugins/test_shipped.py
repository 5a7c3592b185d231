"""Shipped code (plugin/shipped.py): bundles are what they claim, stay in their directory,
and two versions of one plugin never share a module."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from satind.api import lookup_spawnable
from satind.plugin.discovery import directory_hash
from satind.plugin.shipped import (
    LOCK,
    BadBundle,
    Cache,
    bundle_hash,
    check,
    load,
    pack,
    unload,
)

PLUGIN = """
import satind
from . import helper

@satind.spawnable
def value(n: int) -> int:
    return n * helper.WEIGHT

PLUGIN = satind.Plugin(name="weighted", entry=value, usage="weighted N",
                       parse=lambda argv: (int(argv[0]),))
"""

MAX = 1 << 20


def version(root: Path, weight: int) -> Path:
    directory = root / f"v{weight}"
    (directory / "sub").mkdir(parents=True)
    (directory / "weighted.py").write_text(PLUGIN)
    (directory / "helper.py").write_text(f"WEIGHT = {weight}\n")
    (directory / "sub" / "__init__.py").write_text("")
    (directory / "notes.txt").write_text("not Python: not shipped")
    return directory


def test_a_bundle_is_the_directorys_python_and_hashes_as_the_directory(tmp_path: Path) -> None:
    directory = version(tmp_path, 2)
    bundle = pack(directory, MAX, 10)
    assert sorted(bundle) == ["helper.py", "sub/__init__.py", "weighted.py"]
    assert bundle_hash(bundle) == directory_hash(directory)
    check(bundle, directory_hash(directory), MAX, 10)


def test_what_cannot_be_shipped_is_refused_saying_why(tmp_path: Path) -> None:
    with pytest.raises(BadBundle, match="not a directory"):
        pack(tmp_path / "nothing", MAX, 10)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "helper.py").write_text("X = 1\n")
    with pytest.raises(BadBundle, match="no plugin file"):
        pack(tmp_path / "empty", MAX, 10)
    with pytest.raises(BadBundle, match="max_shipped_files"):
        pack(version(tmp_path, 3), MAX, 2)
    with pytest.raises(BadBundle, match="max_shipped_bytes"):
        pack(version(tmp_path, 4), 100, 10)


@pytest.mark.parametrize(
    "name", ["../evil.py", "/etc/evil.py", "a/../../evil.py", ".hidden.py", "evil.sh", "a b.py"]
)
def test_a_received_bundle_with_a_bad_name_is_refused(name: str) -> None:
    bundle = {name: b"X = 1\n"}
    with pytest.raises(BadBundle, match="bad file name"):
        check(bundle, bundle_hash(bundle), MAX, 10)


def test_a_received_bundle_must_have_the_hash_it_claims(tmp_path: Path) -> None:
    bundle = pack(version(tmp_path, 2), MAX, 10)
    claimed = bundle_hash(bundle)
    bundle["helper.py"] = b"WEIGHT = 1000\n"
    with pytest.raises(BadBundle, match="not the"):
        check(bundle, claimed, MAX, 10)
    with pytest.raises(BadBundle, match="max_shipped_bytes"):
        check(bundle, bundle_hash(bundle), 10, 10)


def test_two_versions_load_side_by_side_and_never_mix(tmp_path: Path) -> None:
    cache = Cache(str(tmp_path / "cache"), keep=0)
    loaded = []
    try:
        for weight in (2, 3):
            bundle = pack(version(tmp_path, weight), MAX, 10)
            code_hash = bundle_hash(bundle)
            [plugin] = load(cache.store(code_hash, bundle), code_hash, 30.0, 60.0)
            assert plugin.name == "weighted" and plugin.code_hash == code_hash
            loaded.append(plugin)
        assert loaded[0].entry.fn(5) == 10 and loaded[1].entry.fn(5) == 15
        assert loaded[0].entry.name != loaded[1].entry.name  # a registry name per version
        assert lookup_spawnable(loaded[0].entry.name) is loaded[0].entry
        # Stored again, a version is the same directory; the bundle comes back whole.
        first = loaded[0].code_hash
        assert bundle_hash(cache.bundle(first)) == first
        # Past ``keep`` (here none) unused versions, the least recently used go, modules too.
        assert cache.evict(in_use=[loaded[1].code_hash]) == [first]
        assert not cache.has(first) and lookup_spawnable(loaded[0].entry.name) is None
    finally:
        for plugin in loaded:
            unload(plugin.code_hash)
        cache.close()


PLAIN = """
import json
import satind
import pc_sieve
from pc_sieve import WEIGHT

@satind.spawnable
def value(n: int) -> int:
    assert json.dumps([1]) == "[1]"  # the standard library's, not a file of the version
    return n * WEIGHT + pc_sieve.offset()

PLUGIN = satind.Plugin(name="plain", entry=value, usage="plain N",
                       parse=lambda argv: (int(argv[0]),))
"""


def test_shipped_code_imports_its_helpers_plainly_each_version_its_own(tmp_path: Path) -> None:
    """`import helper` works for a --plugin-path directory and a script; shipped, it failed
    ("No module named 'pc_sieve'"). Each version gets its own helper, and a helper's own plain
    imports work too."""
    cache = Cache(str(tmp_path / "cache"), keep=0)
    loaded = []
    try:
        for weight in (2, 3):
            directory = tmp_path / f"plain{weight}"
            directory.mkdir()
            (directory / "plain.py").write_text(PLAIN)
            (directory / "pc_sieve.py").write_text(
                f"import deeper\nWEIGHT = {weight}\ndef offset():\n    return deeper.OFFSET\n"
            )
            (directory / "deeper.py").write_text(f"OFFSET = {weight * 100}\n")
            (directory / "json.py").write_text("raise ImportError('not this one')\n")
            bundle = pack(directory, MAX, 10)
            code_hash = bundle_hash(bundle)
            [plugin] = load(cache.store(code_hash, bundle), code_hash, 30.0, 60.0)
            loaded.append(plugin)
        assert loaded[0].entry.fn(5) == 10 + 200 and loaded[1].entry.fn(5) == 15 + 300
        assert "pc_sieve" not in sys.modules and "deeper" not in sys.modules  # never shared
    finally:
        for plugin in loaded:
            unload(plugin.code_hash)
        cache.close()


def test_only_a_code_hash_names_a_version_in_the_cache(tmp_path: Path) -> None:
    cache = Cache(str(tmp_path / "cache"), keep=1)
    try:
        for bad in ("../..", "/etc", "ab" * 31, "AB" * 32, ".staging-x"):
            assert not cache.has(bad)
            with pytest.raises(BadBundle, match="not a code hash"):
                cache.bundle(bad)
    finally:
        cache.close()


def test_a_plugin_directory_under_a_dotted_directory_is_not_hidden(tmp_path: Path) -> None:
    directory = version(tmp_path / ".cache", 2)
    assert sorted(pack(directory, MAX, 10)) == ["helper.py", "sub/__init__.py", "weighted.py"]


def test_a_killed_peers_private_cache_is_removed_by_the_next_and_a_living_ones_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGKILLed peer never removes its private cache (25 were seen left in /tmp): the next
    peer that makes one removes those whose peer is gone, by their lock, not their pid."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    make = (
        "import sys, tempfile, time; tempfile.tempdir = sys.argv[1]\n"
        "from satind.plugin.shipped import Cache\n"
        "print(Cache('', keep=1).root, flush=True); time.sleep(60)\n"
    )
    peers = [
        subprocess.Popen(
            [sys.executable, "-c", make, str(tmp_path)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    try:
        assert all(p.stdout is not None for p in peers)
        dead, living = (Path(p.stdout.readline().strip()) for p in peers if p.stdout)
        peers[0].send_signal(signal.SIGKILL)
        peers[0].wait(timeout=30)
        assert dead.is_dir() and (dead / LOCK).exists()  # left behind
        mine = Cache("", keep=1)
        assert not dead.exists()
        assert living.is_dir() and mine.root.is_dir()
        mine.close()
        assert not mine.root.exists() and living.is_dir()
    finally:
        for peer in peers:
            peer.kill()
            peer.wait(timeout=30)
