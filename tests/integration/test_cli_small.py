"""Small things an operator meets on the command line: --version, keys init with a NAME, a
node certificate used as a client's, peers started from a directory that has a satind/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from satind import __version__, _native

pytestmark = pytest.mark.slow


def _satind(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "satind", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_version() -> None:
    proc = _satind("--version")
    compiled = _native.compiled()
    how = f"engine compiled ({len(compiled)} modules, mypyc)" if compiled else "pure Python"
    assert proc.returncode == 0 and proc.stdout.strip() == f"satind {__version__}, {how}"


def test_keys_init_with_a_name_issues_that_node_certificate(tmp_path: Path) -> None:
    proc = _satind("keys", "init", str(tmp_path), "node-a")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "node-a.pem").exists() and (tmp_path / "client.pem").exists()
    assert "node-a" in proc.stdout
    proc = _satind("keys", "init", str(tmp_path / "other"), "--client")
    assert proc.returncode == 2 and "--client is for `keys issue`" in proc.stderr


def test_a_node_certificate_used_by_a_client_is_refused_with_the_reason(tmp_path: Path) -> None:
    assert _satind("keys", "init", str(tmp_path), "node-a").returncode == 0
    # No peer needed: the client refuses before it connects (a peer would only close).
    proc = _satind("status", "--to", "127.0.0.1:9", "--keys", str(tmp_path), "--as", "node-a")
    assert proc.returncode == 2
    assert "certificate of 'node-a' is a peer's" in proc.stderr


def test_peers_started_from_a_directory_with_a_satind_package_run_the_installed_one(
    tmp_path: Path,
) -> None:
    shadow = tmp_path / "satind"
    shadow.mkdir()
    (shadow / "__init__.py").write_text('raise SystemExit("the shadow satind was imported")\n')
    (shadow / "__main__.py").write_text("")
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "satind"), "run", "fib", "15", "--peers", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "result: 610" in proc.stdout
