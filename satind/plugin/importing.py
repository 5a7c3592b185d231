"""Importing one plugin module in this process and taking its plugins: a plugin file under
``satind_path_plugins.<stem>``, an entry point's module, the built-ins; what an import that
failed did. Also what a vetting process (satind/ops/vetter.py) imports modules with.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import pkgutil
import sys
import traceback
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from satind.api import Spawnable
from satind.descriptor import Plugin, module_plugin
from satind.net.values import SHIPPED_PREFIX as SHIPPED_PREFIX
from satind.plugin.discovery import Candidate, is_plugin_name, module_hash
from satind.plugin.siblings import __file__ as SIBLINGS_FILE
from satind.plugin.siblings import builtins_for

PATH_PACKAGE = "satind_path_plugins"
# Shipped code (plugin/shipped.py): a package per version, named by its code hash
# (SHIPPED_PREFIX: the prefix net/values.py knows a version by).


def shipped_package(code_hash: str) -> str:
    """The package a shipped version's modules are imported under."""
    return f"{SHIPPED_PREFIX}{code_hash[:24]}"


def plugins_in(module: types.ModuleType, source: str, code_hash: str = "") -> list[Plugin]:
    """The plugins a module defines itself (its entry function's home, or ``Plugin.module``),
    stamped with where they came from and the code's hash (the module's own by default)."""
    found = []
    code_hash = code_hash or module_hash(module)
    for value in vars(module).values():
        if isinstance(value, Plugin) and module.__name__ in (
            value.entry.fn.__module__,
            value.module,
        ):
            found.append(stamped(value, source, code_hash))
    if not found and not any(is_plugin_name(name) for name in vars(module)):
        # No PLUGIN: a module of spawnable functions is a plugin by itself (module_plugin).
        own = spawnables_of(module)
        if own:
            name = module.__name__.rpartition(".")[2]
            found.append(stamped(module_plugin(name, own[0]), source, code_hash))
    return found


def spawnables_of(module: types.ModuleType) -> list[Spawnable[Any]]:
    """The @spawnable functions a module defines at its top level, in their order."""
    return [
        value
        for value in vars(module).values()
        if isinstance(value, Spawnable) and value.fn.__module__ == module.__name__
    ]


def stamped(plugin: Plugin, source: str, code_hash: str) -> Plugin:
    import dataclasses

    return dataclasses.replace(plugin, source=source, code_hash=code_hash)


def builtin_plugins() -> list[Plugin]:
    # Imported by name: the package lives in plugins/ and is installed as satind_plugins.
    # Part of satind, so not vetted.
    package = importlib.import_module("satind_plugins")
    found: list[Plugin] = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"satind_plugins.{info.name}")
        found.extend(plugins_in(module, f"built-in ({module.__name__})"))
    return found


def load_path_module(path: Path, package_name: str = PATH_PACKAGE) -> types.ModuleType:
    """Import one plugin file under ``<package_name>.<stem>`` (once per process):
    ``satind_path_plugins`` for a ``--plugin-path`` file, a shipped version's own package
    (``shipped_package``) for shipped code."""
    name = f"{package_name}.{path.stem}"
    module = sys.modules.get(name)
    if module is not None and getattr(module, "__file__", None) == str(path):
        return module
    package = sys.modules.get(package_name)
    if package is None:
        package = types.ModuleType(package_name)
        package.__path__ = []
        sys.modules[package_name] = package
    # The directory is a package root: `from . import helper` finds the sibling file, and
    # for an installed plugin directory `import helper` too (appended to sys.path: it cannot
    # shadow an installed module). Not for shipped code: two versions would share `helper`;
    # its plain imports go to the version's own package instead (plugin/siblings.py).
    directory = str(path.parent)
    if directory not in package.__path__:
        package.__path__.append(directory)
    if package_name == PATH_PACKAGE and directory not in sys.path:
        sys.path.append(directory)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    if package_name.startswith(SHIPPED_PREFIX):
        module.__dict__["__builtins__"] = builtins_for(package_name, path.parent)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_entry_point(value: str) -> object:
    """What an entry point's value (``pkg.mod`` or ``pkg.mod:attr.attr``, extras ``[x]`` after
    it ignored) names, imported."""
    module_name, _, attrs = value.split("[", 1)[0].partition(":")
    obj: object = importlib.import_module(module_name.strip())
    for attr in filter(None, attrs.strip().split(".")):
        obj = getattr(obj, attr)
    return obj


def describe_failure(exc: BaseException) -> str:
    """What a plugin module's import did, for a message that names the module: the call to
    ``sys.exit`` or the exception, and where it happened."""
    if isinstance(exc, SystemExit):
        what = f"called sys.exit({exc.code!r})"
    else:
        what = f"raised {type(exc).__name__}: {exc}"
    # Not the shipped code's import hook (plugin/siblings.py): the plugin's line that imports.
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != SIBLINGS_FILE]
    return f"{what} at {frames[-1].filename}:{frames[-1].lineno}" if frames else what


class NoPlugin(LookupError):
    """A plugin module that imports cleanly but gives no plugin."""


def load_one(candidate: Candidate, loader: Any) -> list[Plugin]:
    """Import one vetted plugin module here; its plugins.

    Raises:
        NoPlugin: it defines no plugin of its own.
        Exception, SystemExit: what its import raised.
    """
    with _stdout_to_stderr():
        if isinstance(loader, Path):
            module = load_path_module(loader)
            found = plugins_in(module, f"path {candidate.label}", candidate.code_hash)
            if not found:
                raise NoPlugin(
                    "it names PLUGIN at its top level but defines no Plugin of its own (one "
                    "whose entry function is defined in it)"
                )
            return found
        obj = loader.load()  # an entry point
    if isinstance(obj, Plugin):
        home = sys.modules.get(obj.entry.fn.__module__)
        code_hash = module_hash(home) if home else ""
        return [stamped(obj, candidate.label, code_hash)]
    if isinstance(obj, types.ModuleType):
        return plugins_in(obj, candidate.label)
    raise NoPlugin(f"it names a {type(obj).__name__}, neither a Plugin nor a module")


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Point stdout at stderr, for Python's ``print`` and for writes to file descriptor 1:
    a plugin's import must not mix its output into what satind prints on stdout (``--json``).
    In a peer process stdout is stderr already (ops/child.py)."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    saved = -1
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no stdout or no stderr: nothing to protect or nowhere to go
        if saved >= 0:
            os.close(saved)
        saved = -1
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        if saved >= 0:
            os.dup2(saved, 1)
            os.close(saved)
