"""The Plugin descriptor and plugin discovery.

A plugin is an application: a spawnable entry function plus what satind needs to run it by
name — argument parsing with a usage message, the maximum branching factor (progress is
estimated from job ids with it), an optional independent check of the result, and an
optional report that turns the raw result into what the user sees.

Plugins are found in three places, later ones overriding earlier ones by name:

1. the built-ins, modules of the ``satind_plugins`` package;
2. installed distributions' entry points in the group ``satind.plugins``;
3. each ``--plugin-path DIR``: every ``*.py`` there that defines a ``Plugin``, imported as
   ``satind_path_plugins.<file stem>`` so that every peer, given the same directory, names
   its spawnable functions the same way. DIR is a package root: a plugin imports its sibling
   modules (``import helper``, or ``from . import helper``), and its code hash covers every
   ``*.py`` under DIR, so a changed helper is a changed plugin. ``rescan`` loads them again
   (``satind plugins reload``, SIGHUP).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import logging
import pkgutil
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from satind.api import Spawnable, forget_module

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "satind.plugins"
PATH_PACKAGE = "satind_path_plugins"


class UsageError(ValueError):
    """Bad plugin arguments. The message says what was wrong; satind adds the usage line."""


class CheckFailed(AssertionError):
    """A plugin's independent check rejected a result."""


class NotChecked(Exception):
    """Raised by a plugin's check that cannot verify this result independently (too large to
    compute again, no certificate to check): the run then says "not checked: <message>"
    instead of "ok". Say why, and up to what size the check does verify."""


class PluginFailed(RuntimeError):
    """A plugin's own code raised outside a job: its ``parse`` with something other than a
    usage error, or its ``max_branching``. A bug in the plugin; the message says where."""


@dataclass(frozen=True)
class Plugin:
    """Describes an application that satind can run by name.

    Args:
        name: what users type after ``satind run``.
        entry: the spawnable function the run's root job calls.
        usage: the argument synopsis, e.g. ``"fib N [THRESHOLD]"``.
        parse: turns the command-line arguments into the entry's arguments; raises
            ``UsageError`` with a message saying what is wrong.
        max_branching: the most children one job spawns, or a function of the entry's
            arguments giving it. A job's share of its parent's work is 1/max_branching, which
            is how progress is estimated from job ids; None when not known (job ids are level
            stamps either way; progress then assumes 2).
        check: optional independent check of a result, ``check(entry_args, result)``; raises
            (``CheckFailed`` or any exception) when the result is wrong, ``NotChecked`` when
            it cannot verify this result (the run then says "not checked", never "ok").
        report: optional, turns the raw result into the JSON-able value users see,
            ``report(argv, result)``; may write files the arguments name. Runs where the
            result is delivered (the submitting client). Default: the raw result.
        description: one line for ``satind plugins``.
    """

    name: str
    entry: Spawnable[Any]
    usage: str
    parse: Callable[[Sequence[str]], tuple[Any, ...]]
    max_branching: int | Callable[[tuple[Any, ...]], int] | None = None
    check: Callable[[tuple[Any, ...], Any], None] | None = None
    report: Callable[[Sequence[str], Any], Any] | None = None
    description: str = ""
    # Filled by discovery: where the plugin came from and the sha256 of its module's source.
    source: str = field(default="", compare=False)
    code_hash: str = field(default="", compare=False)
    # The module that defines the plugin when its entry lives elsewhere (an iterative
    # application's entry is satind.iterative.drive): discovery finds it there only.
    module: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.entry, Spawnable):
            raise TypeError(
                f"plugin {self.name!r}: entry must be a @spawnable function, got {self.entry!r}"
            )
        if isinstance(self.max_branching, int) and self.max_branching < 1:
            raise ValueError(f"plugin {self.name!r}: max_branching must be >= 1")

    def branching(self, args: tuple[Any, ...]) -> int:
        """The maximum branching factor of a run with these entry arguments (2 if unknown).

        Raises:
            PluginFailed: the plugin's ``max_branching`` raised or gave no number.
        """
        value = self.max_branching
        try:
            if callable(value):
                value = value(args)
            # Bounded: the branching factor travels in a 64-bit protocol field.
            return max(1, min(int(value or 2), 2**31))
        except Exception as exc:
            raise PluginFailed(
                f"plugin {self.name}: its max_branching raised {type(exc).__name__}: {exc}"
            ) from exc

    def parse_args(self, argv: Sequence[str]) -> tuple[Any, ...]:
        """Parse arguments, turning a failure into a UsageError that carries the usage line.

        Raises:
            UsageError: the arguments are not valid for this plugin (``parse`` raised a
                UsageError, ValueError, TypeError or IndexError: what bad input does).
            PluginFailed: ``parse`` raised anything else (a bug in the plugin).
        """
        try:
            return tuple(self.parse(list(argv)))
        except UsageError as exc:
            raise UsageError(f"{self.name}: {exc}\nusage: satind run {self.usage}") from None
        except (ValueError, TypeError, IndexError) as exc:
            raise UsageError(
                f"{self.name}: bad arguments {list(argv)!r} ({exc})\nusage: satind run {self.usage}"
            ) from None
        except Exception as exc:
            raise PluginFailed(
                f"plugin {self.name}: its argument parser raised {type(exc).__name__}: {exc} "
                f"(arguments {list(argv)!r})"
            ) from exc

    def make_report(self, argv: Sequence[str], result: Any) -> Any:
        return result if self.report is None else self.report(argv, result)


class UnknownPlugin(LookupError):
    def __init__(self, name: str, available: Iterable[str], message: str = "") -> None:
        self.name = name
        self.available = sorted(available)
        super().__init__(
            message
            or f"unknown plugin {name!r}; available: {', '.join(self.available) or '(none)'}"
        )


def driven(
    name: str,
    entry: Any,
    usage: str,
    parse: Callable[[Sequence[str]], Any],
    check: Callable[[Any, Any], None] | None,
    report: Callable[[Sequence[str], Any], Any] | None,
    description: str,
    module: str,
) -> Plugin:
    """A plugin whose root is one of satind's drivers (iterative and SPMD runs): the root gets
    (plugin name, the application's arguments), and ``check`` the application's arguments.
    ``module``: the module that defines it (discovery takes a plugin from there only)."""
    return Plugin(
        name=name,
        entry=entry,
        usage=usage,
        parse=lambda argv: (name, parse(argv)),
        max_branching=None,
        check=(lambda args, result: check(args[1], result)) if check is not None else None,
        report=report,
        description=description,
        module=module,
    )


def _module_hash(module: types.ModuleType) -> str:
    """sha256 of the module's source file: the plugin's code version."""
    path = getattr(module, "__file__", None)
    if not path:
        return ""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def _directory_hash(directory: Path) -> str:
    """sha256 over every ``*.py`` under a plugin directory (names and contents, in order)."""
    digest = hashlib.sha256()
    for file in _sources_under(directory):
        digest.update(str(file.relative_to(directory)).encode() + b"\0")
        digest.update(file.read_bytes())
    return digest.hexdigest()


def _sources_under(directory: Path) -> list[Path]:
    return sorted(
        f
        for f in directory.rglob("*.py")
        if not any(part.startswith(".") or part == "__pycache__" for part in f.parts)
    )


def _plugins_in(module: types.ModuleType, source: str, code_hash: str = "") -> list[Plugin]:
    found = []
    code_hash = code_hash or _module_hash(module)
    for value in vars(module).values():
        if isinstance(value, Plugin) and module.__name__ in (
            value.entry.fn.__module__,
            value.module,
        ):
            found.append(_stamped(value, source, code_hash))
    return found


def _stamped(plugin: Plugin, source: str, code_hash: str) -> Plugin:
    import dataclasses

    return dataclasses.replace(plugin, source=source, code_hash=code_hash)


def _builtin_plugins() -> list[Plugin]:
    # Imported by name: the package lives in plugins/ and is installed as satind_plugins.
    package = importlib.import_module("satind_plugins")
    found: list[Plugin] = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"satind_plugins.{info.name}")
        found.extend(_plugins_in(module, f"built-in ({module.__name__})"))
    return found


def _entry_point_plugins() -> list[Plugin]:
    found: list[Plugin] = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
        except Exception as exc:  # a broken third-party plugin must not hide the others
            log.warning("cannot load plugin entry point %s: %s", ep.value, exc)
            continue
        source = f"entry point {ep.name} ({ep.value})"
        if isinstance(obj, Plugin):
            module = sys.modules.get(obj.entry.fn.__module__)
            code_hash = _module_hash(module) if module else ""
            found.append(_stamped(obj, source, code_hash))
        elif isinstance(obj, types.ModuleType):
            found.extend(_plugins_in(obj, source))
        else:
            log.warning("entry point %s is neither a Plugin nor a module", ep.value)
    return found


def load_path_module(path: Path) -> types.ModuleType:
    """Import one plugin file under ``satind_path_plugins.<stem>`` (once per process)."""
    name = f"{PATH_PACKAGE}.{path.stem}"
    module = sys.modules.get(name)
    if module is not None and getattr(module, "__file__", None) == str(path):
        return module
    package = sys.modules.get(PATH_PACKAGE)
    if package is None:
        package = types.ModuleType(PATH_PACKAGE)
        package.__path__ = []
        sys.modules[PATH_PACKAGE] = package
    # The directory is a package root: `from . import helper` finds the sibling file, and
    # `import helper` too (appended to sys.path: it cannot shadow an installed module).
    directory = str(path.parent)
    if directory not in package.__path__:
        package.__path__.append(directory)
    if directory not in sys.path:
        sys.path.append(directory)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _path_plugins(dirs: Sequence[Path]) -> list[Plugin]:
    found: list[Plugin] = []
    for directory in dirs:
        if not directory.is_dir():
            raise FileNotFoundError(f"--plugin-path {directory}: no such directory")
        code_hash = _directory_hash(directory)
        for file in sorted(directory.glob("*.py")):
            try:
                module = load_path_module(file.resolve())
            except Exception as exc:
                log.warning("cannot import plugin file %s: %s", file, exc)
                continue
            found.extend(_plugins_in(module, f"path {file}", code_hash))
    return found


def rescan(dirs: Sequence[Path]) -> dict[str, Plugin]:
    """``discover`` again, with every module loaded from the plugin directories forgotten
    first, so that changed, new and removed files take effect (built-ins and installed
    packages stay as they are: those need a restart). Functions held by jobs already made
    stay the old ones."""
    roots = [str(d.resolve()) for d in dirs]
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None) or ""
        if any(file.startswith(root + "/") for root in roots):
            del sys.modules[name]
            forget_module(name)
    importlib.invalidate_caches()
    return discover(dirs)


def discover(plugin_paths: Sequence[Path] = ()) -> dict[str, Plugin]:
    """Every plugin this process can run, by name (paths override entry points, which
    override built-ins)."""
    plugins: dict[str, Plugin] = {}
    for plugin in [*_builtin_plugins(), *_entry_point_plugins(), *_path_plugins(plugin_paths)]:
        known = plugins.get(plugin.name)
        if known is not None and known.source != plugin.source:
            log.info("plugin %s from %s overrides %s", plugin.name, plugin.source, known.source)
        plugins[plugin.name] = plugin
    return plugins


def find(name: str, plugin_paths: Sequence[Path] = ()) -> Plugin:
    """The plugin called ``name``.

    Raises:
        UnknownPlugin: no plugin has that name (the error lists the available ones).
    """
    plugins = discover(plugin_paths)
    try:
        return plugins[name]
    except KeyError:
        raise UnknownPlugin(name, plugins) from None
