"""Finding plugin modules without running them: the entry points of installed distributions,
the plugin files of ``--plugin-path`` directories (found by parsing them), and the code
version of each (a directory's hash covers every ``*.py`` under it, helpers included).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import types
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from satind.vetting import Unit

ENTRY_POINT_GROUP = "satind.plugins"


def module_hash(module: types.ModuleType) -> str:
    """sha256 of the module's source file: the plugin's code version."""
    path = getattr(module, "__file__", None)
    if not path:
        return ""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def directory_hash(directory: Path) -> str:
    """sha256 over every ``*.py`` under a plugin directory (names and contents, in order)."""
    digest = hashlib.sha256()
    for file in sources_under(directory):
        digest.update(str(file.relative_to(directory)).encode() + b"\0")
        digest.update(file.read_bytes())
    return digest.hexdigest()


def sources_under(directory: Path) -> list[Path]:
    """The files a plugin directory's code hash covers (and a shipped bundle holds)."""
    return sorted(
        f
        for f in directory.rglob("*.py")
        # The parts under ``directory`` only: a directory in ~/.cache is not hidden for that.
        if not any(
            part.startswith(".") or part == "__pycache__" for part in f.relative_to(directory).parts
        )
    )


def is_plugin_name(name: str) -> bool:
    """The top-level names that make a file in a plugin directory a plugin file."""
    return name == "PLUGIN" or name.startswith("PLUGIN_")


# Calls that make a plugin: a file that makes one at top level but names it otherwise gets a
# warning (it is not loaded, and its author probably expects it to be).
_MAKERS = {"Plugin", "iterative_plugin", "spmd_plugin"}


def plugin_files(directory: Path) -> tuple[list[Path], list[str]]:
    """The plugin files of a ``--plugin-path`` directory, found by reading them, never by
    running them: each ``*.py`` directly in it that assigns ``PLUGIN`` or ``PLUGIN_<anything>``
    at its top level (not inside a function, class, ``if`` or ``try``), and each that defines
    a ``@spawnable`` function at its top level and no plugin (a module of functions is a
    plugin by itself, named after it: ``module_plugin``; not a ``_name.py``). The other files
    (helpers) run only when a plugin imports them. Also what is wrong with the files that
    could not be read, and with those that make a plugin under another name."""
    files: list[Path] = []
    problems: list[str] = []
    for file in sorted(directory.glob("*.py")):
        try:
            tree = ast.parse(file.read_bytes(), str(file))
        except (OSError, SyntaxError, ValueError) as exc:
            problems.append(f"{file}: cannot be read as Python: {exc}")
            continue
        names: list[str] = []
        makes = ""
        spawns = False  # a top-level @spawnable function: a module of them is a plugin
        for statement in tree.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                spawns = spawns or any(_is_spawnable(d) for d in statement.decorator_list)
            targets: list[ast.expr] = []
            value: ast.expr | None = None
            if isinstance(statement, ast.Assign):
                targets, value = statement.targets, statement.value
            elif isinstance(statement, ast.AnnAssign):
                targets, value = [statement.target], statement.value
            elif isinstance(statement, ast.ImportFrom):  # then it is told it has no Plugin
                names.extend(alias.asname or alias.name for alias in statement.names)
            for target in targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        names.append(node.id)
            if isinstance(value, ast.Call) and _called(value) in _MAKERS and targets:
                makes = makes or ast.unparse(targets[0])
        if any(is_plugin_name(n) for n in names):
            files.append(file)
        elif spawns and not makes and not file.name.startswith("_"):
            files.append(file)  # a module of functions without PLUGIN (module_plugin)
        elif makes:
            problems.append(
                f"{file}: not loaded: it makes a plugin but calls it {makes}; satind loads "
                "the files that assign PLUGIN (or PLUGIN_<anything>) at their top level"
            )
    return files, problems


def _is_spawnable(decorator: ast.expr) -> bool:
    """``@spawnable``, ``@satind.spawnable`` (or either called)."""
    if isinstance(decorator, ast.Call):
        decorator = decorator.func
    if isinstance(decorator, ast.Attribute):
        return decorator.attr == "spawnable"
    return isinstance(decorator, ast.Name) and decorator.id == "spawnable"


def _called(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


@dataclass(frozen=True)
class Candidate:
    """A plugin module to load: its vetting unit, its name in messages and sources, and its
    code version."""

    unit: Unit
    label: str
    fingerprint: str
    code_hash: str = ""

    @property
    def key(self) -> str:
        return f"{self.unit.kind}:{self.unit.target}"


def find_candidates(dirs: Sequence[Path], failures: list[str]) -> list[tuple[Candidate, Any]]:
    """Every entry point and plugin file, with what loads it (the entry point object, or the
    file's resolved path). Files that are not plugin files are left out, unread; a line for
    each file that could not be read, or makes a plugin under another name, goes to
    ``failures``."""
    found: list[tuple[Candidate, Any]] = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        version = f"{getattr(dist, 'name', '')} {getattr(dist, 'version', '')}"
        unit = Unit("module", ep.value)
        found.append((Candidate(unit, f"entry point {ep.name} ({ep.value})", version), ep))
    for directory in dirs:
        if not directory.is_dir():
            raise FileNotFoundError(f"--plugin-path {directory}: no such directory")
        code_hash = directory_hash(directory)
        files, problems = plugin_files(directory)
        failures.extend(problems)
        for file in files:
            path = file.resolve()
            unit = Unit("file", str(path))
            found.append((Candidate(unit, str(file), code_hash, code_hash), path))
    return found
