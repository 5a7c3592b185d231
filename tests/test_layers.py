"""The layers of satind, declared as import-linter contracts in pyproject.toml
([tool.importlinter]), hold: a change that breaks one fails here, not in review."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from importlinter.cli import lint_imports

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_import_contracts_hold() -> None:
    # no_cache: no .import_linter_cache in the tree (the suite's workers would race on it)
    assert lint_imports(config_filename=str(PYPROJECT), no_cache=True, no_logo=True) == 0


def test_the_core_loads_no_io_and_no_compute_side_beyond_the_author_api() -> None:
    """What the contracts say, as it runs: past the package ``satind`` itself (the plugin
    author's API, which is the compute side's face), importing the core's door loads no trio,
    no TLS, no transport, no plugin loader and nothing more of the compute side."""
    probe = (
        "import sys, satind\n"
        "before = set(sys.modules)\n"
        "import satind.core.handle\n"
        "print('\\n'.join(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert "satind.core.handle" in out  # the probe did import it
    loaded = [
        name
        for name in out
        if name.split(".")[0] in ("trio", "ssl", "socket", "threading", "logging", "queue")
        or name.startswith(("satind.engine", "satind.plugin", "satind.net.transport"))
        or name in ("satind.api", "satind.net.framing", "satind.net.connection")
    ]
    assert loaded == []
