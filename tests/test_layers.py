"""The layers of satind, declared as import-linter contracts in pyproject.toml
([tool.importlinter]), hold: a change that breaks one fails here, not in review."""

from __future__ import annotations

from pathlib import Path

from importlinter.cli import lint_imports

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_import_contracts_hold() -> None:
    # no_cache: no .import_linter_cache in the tree (the suite's workers would race on it)
    assert lint_imports(config_filename=str(PYPROJECT), no_cache=True, no_logo=True) == 0
