"""What satind.Executor ships for a function (client/executor.py): the module's directory, or
nothing for a module every peer has; and what it refuses before anything is sent."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from satind.client.executor import (
    PLACEHOLDER,
    PLUGIN_FILE,
    SHIPPED_LINE,
    TEMPLATE,
    function_home,
)
from satind.plugin import shipped


def test_installed_and_builtin_functions_are_named_not_shipped() -> None:
    assert function_home(json.dumps) == ("json", None, "dumps")
    assert function_home(pow) == ("builtins", None, "pow")


def test_a_module_of_ones_own_ships_the_directory_of_its_top_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "__init__.py").write_text("")
    (tmp_path / "work" / "jobs.py").write_text("def square(x):\n    return x * x\n")
    (tmp_path / "alone.py").write_text("def cube(x):\n    return x ** 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        jobs = importlib.import_module("work.jobs")
        alone = importlib.import_module("alone")
        assert function_home(jobs.square) == ("work.jobs", tmp_path, "square")
        assert function_home(alone.cube) == ("alone", tmp_path, "cube")
    finally:
        for name in ("work", "work.jobs", "alone"):
            sys.modules.pop(name, None)


def test_lambdas_nested_functions_and_non_functions_are_refused_saying_why() -> None:
    def nested(x: int) -> int:
        return x

    with pytest.raises(TypeError, match="top level of a module"):
        function_home(lambda x: x)
    with pytest.raises(TypeError, match="top level of a module"):
        function_home(nested)
    with pytest.raises(TypeError, match="runs functions"):
        function_home(42)  # type: ignore[arg-type]


def test_the_bundle_is_the_directory_and_the_executor_plugin(tmp_path: Path) -> None:
    (tmp_path / "primes.py").write_text("def f(x):\n    return x\n")
    # Both lines the Executor sets are in the template, as it writes them.
    assert TEMPLATE.count(PLACEHOLDER) == 1 and TEMPLATE.count(SHIPPED_LINE) == 1
    plugin = TEMPLATE.replace(PLACEHOLDER, "MODULE = 'primes'").encode()
    bundle = shipped.pack(tmp_path, 1 << 20, 10, {PLUGIN_FILE: plugin})
    assert set(bundle) == {"primes.py", PLUGIN_FILE}
    # Without a directory (an installed module's function): the plugin file alone.
    assert set(shipped.pack(None, 1 << 20, 10, {PLUGIN_FILE: plugin})) == {PLUGIN_FILE}
    with pytest.raises(shipped.BadBundle, match="max_shipped_bytes"):
        shipped.pack(tmp_path, 100, 10, {PLUGIN_FILE: plugin})
