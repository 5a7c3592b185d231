"""Plain imports of a shipped plugin's helpers: ``import helper`` in shipped code finds the
``helper.py`` shipped beside it, as it does for a ``--plugin-path`` directory (on sys.path,
after the installed packages).

A shipped version is imported under a package of its own, ``satind_shipped_<hash>``
(plugin/shipped.py), so that two versions of one plugin never share a module: its directory is
never put on sys.path, where ``helper`` would be one module for every version. Instead each
module of the version runs with builtins of its own whose ``__import__`` turns an absolute
import of a module of the version's directory into the import of that module in the version's
package (``import helper`` binds the version's ``helper``; ``from helper import f`` takes
``f`` from it). Its helpers are loaded the same way (a finder on sys.meta_path for the
packages' submodules), so a helper's own plain imports work too.

As on sys.path after the installed packages (a ``--plugin-path`` directory is appended), a
name that an installed module or the standard library has is not taken from the directory;
another plugin's ``--plugin-path`` directory does not count (its ``helper.py`` is not this
version's).
``importlib.import_module("helper")`` is not an import statement and does not see the
version's files: use ``import helper``.
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from satind.net.values import SHIPPED_PREFIX as _PREFIX

# Imports of satind_shipped_<hash> modules (_PREFIX) go through this module's finder once
# installed.
# The package of --plugin-path files (plugin/importing.py): its __path__ lists their directories.
_PATH_PACKAGE = "satind_path_plugins"
# package name -> the builtins its modules run with.
_BUILTINS: dict[str, dict[str, Any]] = {}


def builtins_for(package: str, directory: Path) -> dict[str, Any]:
    """The builtins the modules of ``package`` (a shipped version, in ``directory``) run with:
    the real ones with an ``__import__`` that finds the version's own modules."""
    known = _BUILTINS.get(package)
    if known is not None:
        return known
    real = builtins.__import__
    siblings: dict[str, bool] = {}  # a top-level name -> whether it is the version's

    def is_sibling(top: str) -> bool:
        found = siblings.get(top)
        if found is None:
            here = (directory / f"{top}.py").is_file() or (directory / top).is_dir()
            # Installed first, as on sys.path with the directory appended.
            found = here and not _installed(top)
            siblings[top] = found
        return found

    def sibling_import(
        name: str,
        globals: dict[str, Any] | None = None,
        locals: dict[str, Any] | None = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> types.ModuleType:
        top = name.partition(".")[0]
        if level != 0 or not top or not is_sibling(top):
            return real(name, globals, locals, fromlist, level)
        full = f"{package}.{name}"
        real(full, globals, locals, fromlist, 0)
        # `from helper import f` takes from helper; `import helper.sub` binds helper.
        return sys.modules[full] if fromlist else sys.modules[f"{package}.{top}"]

    made = dict(vars(builtins))
    made["__import__"] = sibling_import
    _BUILTINS[package] = made
    _install_finder()
    return made


def forget(package: str) -> None:
    """A version unloaded (plugin/shipped.py ``unload``): its builtins go."""
    _BUILTINS.pop(package, None)


def _installed(top: str) -> bool:
    """Whether ``top`` is a module of the standard library or an installed package: found on
    sys.path but for the ``--plugin-path`` directories appended to it (another plugin's
    ``helper.py`` there must not stand in for this version's; the vetting process, which has
    none of them, decides the same)."""
    if top in sys.builtin_module_names or top in sys.stdlib_module_names:
        return True
    plugin_dirs = set(getattr(sys.modules.get(_PATH_PACKAGE), "__path__", ()))
    search = [p for p in sys.path if p not in plugin_dirs]
    return importlib.machinery.PathFinder.find_spec(top, search) is not None


class _Loader(importlib.machinery.SourceFileLoader):
    """A shipped version's helper module, run with the version's builtins."""

    def exec_module(self, module: types.ModuleType) -> None:
        package = module.__name__.partition(".")[0]
        made = _BUILTINS.get(package)
        if made is not None:
            module.__dict__["__builtins__"] = made
        super().exec_module(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds a shipped version's submodules as the path finder does, with ``_Loader``."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(_PREFIX) or "." not in fullname or path is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec
        loader = _Loader(fullname, spec.loader.path)
        return importlib.util.spec_from_file_location(
            fullname,
            spec.loader.path,
            loader=loader,
            submodule_search_locations=spec.submodule_search_locations,
        )


_FINDER = _Finder()


def _install_finder() -> None:
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
