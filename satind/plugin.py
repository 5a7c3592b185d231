"""The Plugin descriptor and plugin discovery.

A plugin is an application: a spawnable entry function plus what satind needs to run it by
name — argument parsing with a usage message, the maximum branching factor (progress is
estimated from job ids with it), an optional independent check of the result, and an
optional report that turns the raw result into what the user sees.

Plugins are found in three places, later ones overriding earlier ones by name:

1. the built-ins, modules of the ``satind_plugins`` package;
2. installed distributions' entry points in the group ``satind.plugins``;
3. each ``--plugin-path DIR``: every ``*.py`` directly in DIR that assigns ``PLUGIN`` or
   ``PLUGIN_<anything>`` at its top level — found by parsing the files, never by running
   them (``plugin_files``) — imported as ``satind_path_plugins.<file stem>`` so that every
   peer, given the same directory, names its spawnable functions the same way. The other
   files of DIR run only as a plugin's own imports. DIR is a package root: a plugin imports
   its sibling modules (``import helper``, or ``from . import helper``), and its code hash
   covers every ``*.py`` under DIR, so a changed helper is a changed plugin. ``rescan``
   loads them again (``satind plugins reload``, SIGHUP).

The modules of 2 and 3 are vetted before they are imported here (satind/vetting.py): one
whose import fails, exits or hangs is not loaded, with a line saying which and why, and
costs nothing else.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import logging
import os
import pkgutil
import sys
import traceback
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from satind.api import Spawnable, forget_module
from satind.config import DEFAULT, PluginsConfig
from satind.vetting import Unit, vet

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


# The run kinds a plugin's root can start (``Plugin.kind``).
RunKind = Literal["divide-and-conquer", "iterative", "spmd"]


@dataclass(frozen=True)
class Plugin:
    """Describes an application that satind can run by name.

    Args:
        name: what users type after ``satind run``.
        entry: the spawnable function the run's root job calls.
        usage: the argument synopsis, e.g. ``"fib N [THRESHOLD]"``.
        parse: turns the command-line arguments into the entry's arguments; raises
            ``UsageError`` with a message saying what is wrong. Reads an input file the
            arguments name with ``satind.input_file`` (never ``open``: it runs on a peer).
        max_branching: the most children one job spawns, or a function of the entry's
            arguments giving it. A job's share of its parent's work is 1/max_branching, which
            is how progress is estimated from job ids; None when not known (job ids are level
            stamps either way; progress then assumes 2).
        check: optional independent check of a result, ``check(entry_args, result)``; raises
            (``CheckFailed`` or any exception) when the result is wrong, ``NotChecked`` when
            it cannot verify this result (the run then says "not checked", never "ok").
        report: optional, turns the raw result into the JSON-able value users see,
            ``report(argv, result)``; makes the output files the arguments name with
            ``satind.output_file`` (never by writing them: it runs on the run's master, and
            the files go to the submitter). Default: the raw result.
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
    # What kind of run its root starts: a divide-and-conquer tree (any @spawnable entry), or
    # one of satind's drivers, which schedules an iterative or SPMD run from the master
    # (``driven``). The core reads this, so it never imports the drivers' modules.
    kind: RunKind = "divide-and-conquer"

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
    kind: RunKind,
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
        kind=kind,
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
    # Part of satind, so not vetted.
    package = importlib.import_module("satind_plugins")
    found: list[Plugin] = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"satind_plugins.{info.name}")
        found.extend(_plugins_in(module, f"built-in ({module.__name__})"))
    return found


def is_plugin_name(name: str) -> bool:
    """The top-level names that make a file in a plugin directory a plugin file."""
    return name == "PLUGIN" or name.startswith("PLUGIN_")


# Calls that make a plugin: a file that makes one at top level but names it otherwise gets a
# warning (it is not loaded, and its author probably expects it to be).
_MAKERS = {"Plugin", "iterative_plugin", "spmd_plugin"}


def plugin_files(directory: Path) -> tuple[list[Path], list[str]]:
    """The plugin files of a ``--plugin-path`` directory, found by reading them, never by
    running them: each ``*.py`` directly in it that assigns ``PLUGIN`` or ``PLUGIN_<anything>``
    at its top level (not inside a function, class, ``if`` or ``try``). The other files
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
        for statement in tree.body:
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
        elif makes:
            problems.append(
                f"{file}: not loaded: it makes a plugin but calls it {makes}; satind loads "
                "the files that assign PLUGIN (or PLUGIN_<anything>) at their top level"
            )
    return files, problems


def _called(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


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
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{what} at {frames[-1].filename}:{frames[-1].lineno}" if frames else what


class NoPlugin(LookupError):
    """A plugin module that imports cleanly but gives no plugin."""


@dataclass(frozen=True)
class Verdict:
    """How a plugin module fared when it was vetted (satind/vetting.py): what went wrong
    ("" for nothing), and the version of its code then (its directory's hash, or its
    distribution's version), so that a verdict is reused only for the same code."""

    fingerprint: str
    error: str


@dataclass
class Discovery:
    """What loading the plugins found: the plugins by name, a line per plugin module that was
    not loaded (its file or entry point, and why), and the verdicts of the modules vetted
    (a launcher hands them to its peers, which then need not vet the same code again)."""

    plugins: dict[str, Plugin] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    verdicts: dict[str, Verdict] = field(default_factory=dict)


@dataclass(frozen=True)
class _Candidate:
    """A plugin module to load: its vetting unit, its name in messages and sources, and its
    code version."""

    unit: Unit
    label: str
    fingerprint: str
    code_hash: str = ""

    @property
    def key(self) -> str:
        return f"{self.unit.kind}:{self.unit.target}"


def _candidates(dirs: Sequence[Path], discovery: Discovery) -> list[tuple[_Candidate, Any]]:
    """Every entry point and plugin file, with what loads it (the entry point object, or the
    file's resolved path). Files that are not plugin files are left out, unread."""
    found: list[tuple[_Candidate, Any]] = []
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        version = f"{getattr(dist, 'name', '')} {getattr(dist, 'version', '')}"
        unit = Unit("module", ep.value)
        found.append((_Candidate(unit, f"entry point {ep.name} ({ep.value})", version), ep))
    for directory in dirs:
        if not directory.is_dir():
            raise FileNotFoundError(f"--plugin-path {directory}: no such directory")
        code_hash = _directory_hash(directory)
        files, problems = plugin_files(directory)
        discovery.failures.extend(problems)
        for file in files:
            path = file.resolve()
            unit = Unit("file", str(path))
            found.append((_Candidate(unit, str(file), code_hash, code_hash), path))
    return found


def load(
    plugin_paths: Sequence[Path] = (),
    limits: PluginsConfig = DEFAULT.plugins,
    vetted: Mapping[str, Verdict] | None = None,
) -> Discovery:
    """Every plugin this process can run, by name (paths override entry points, which
    override built-ins), and what was not loaded.

    Plugin modules from entry points and plugin directories are vetted first (imported in a
    process of their own, each within ``limits.import_timeout_s``: satind/vetting.py),
    except those with a verdict in ``vetted`` for the same code; only those that came
    through are imported here. What a module writes to stdout while it is imported here goes
    to stderr.

    Raises:
        FileNotFoundError: a plugin path is not a directory.
    """
    discovery = Discovery()
    candidates = _candidates(plugin_paths, discovery)
    discovery.verdicts = _vetted([c for c, _ in candidates], limits, vetted or {})
    found = _builtin_plugins()
    for candidate, loader in candidates:
        error = discovery.verdicts[candidate.key].error
        if not error:
            try:
                found.extend(_load_one(candidate, loader))
                continue
            except NoPlugin as exc:
                error = str(exc)
            except (Exception, SystemExit) as exc:
                # Vetted, yet it failed here: a module that behaves differently each time.
                error = describe_failure(exc)
        discovery.failures.append(f"{candidate.label}: not loaded: {error}")
    for plugin in found:
        known = discovery.plugins.get(plugin.name)
        if known is not None and known.source != plugin.source:
            log.info("plugin %s from %s overrides %s", plugin.name, plugin.source, known.source)
        discovery.plugins[plugin.name] = plugin
    return discovery


def _vetted(
    candidates: Sequence[_Candidate], limits: PluginsConfig, given: Mapping[str, Verdict]
) -> dict[str, Verdict]:
    """A verdict on each candidate: the given one for the same code, else a fresh one."""
    fresh = [
        c for c in candidates if c.key not in given or given[c.key].fingerprint != c.fingerprint
    ]
    verdicts = (
        vet([c.unit for c in fresh], limits.import_timeout_s, limits.vetter_start_timeout_s)
        if fresh
        else {}
    )
    return {
        c.key: (Verdict(c.fingerprint, verdicts.get(c.unit, "")) if c in fresh else given[c.key])
        for c in candidates
    }


def vet_plugins(
    plugin_paths: Sequence[Path],
    limits: PluginsConfig,
    vetted: Mapping[str, Verdict] | None = None,
) -> Discovery:
    """``load`` without loading: the verdicts on every plugin module (reusing those in
    ``vetted`` for the same code) and a line for each that would not be loaded; no plugin
    code runs in this process. A daemon's supervisor does this before it starts a peer.

    Raises:
        FileNotFoundError: a plugin path is not a directory.
    """
    discovery = Discovery()
    candidates = [c for c, _ in _candidates(plugin_paths, discovery)]
    discovery.verdicts = _vetted(candidates, limits, vetted or {})
    for c in candidates:
        error = discovery.verdicts[c.key].error
        if error:
            discovery.failures.append(f"{c.label}: not loaded: {error}")
    return discovery


def _load_one(candidate: _Candidate, loader: Any) -> list[Plugin]:
    """Import one vetted plugin module here; its plugins.

    Raises:
        NoPlugin: it defines no plugin of its own.
        Exception, SystemExit: what its import raised.
    """
    with _stdout_to_stderr():
        if isinstance(loader, Path):
            module = load_path_module(loader)
            found = _plugins_in(module, f"path {candidate.label}", candidate.code_hash)
            if not found:
                raise NoPlugin(
                    "it names PLUGIN at its top level but defines no Plugin of its own (one "
                    "whose entry function is defined in it)"
                )
            return found
        obj = loader.load()  # an entry point
    if isinstance(obj, Plugin):
        home = sys.modules.get(obj.entry.fn.__module__)
        code_hash = _module_hash(home) if home else ""
        return [_stamped(obj, candidate.label, code_hash)]
    if isinstance(obj, types.ModuleType):
        return _plugins_in(obj, candidate.label)
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


def rescan(dirs: Sequence[Path], limits: PluginsConfig = DEFAULT.plugins) -> Discovery:
    """``load`` again, with every module loaded from the plugin directories forgotten first,
    so that changed, new and removed files take effect (built-ins and installed packages stay
    as they are: those need a restart). Functions held by jobs already made stay the old
    ones."""
    roots = [str(d.resolve()) for d in dirs]
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None) or ""
        if any(file.startswith(root + "/") for root in roots):
            del sys.modules[name]
            forget_module(name)
    importlib.invalidate_caches()
    return load(dirs, limits)


def discover(
    plugin_paths: Sequence[Path] = (),
    limits: PluginsConfig = DEFAULT.plugins,
) -> dict[str, Plugin]:
    """Every plugin this process can run, by name (``load``); a warning for each plugin
    module that was not loaded."""
    discovery = load(plugin_paths, limits)
    for failure in discovery.failures:
        log.warning("%s", failure)
    return discovery.plugins


def find(
    name: str,
    plugin_paths: Sequence[Path] = (),
    limits: PluginsConfig = DEFAULT.plugins,
) -> Plugin:
    """The plugin called ``name``.

    Raises:
        UnknownPlugin: no plugin has that name (the error lists the available ones).
    """
    plugins = discover(plugin_paths, limits)
    try:
        return plugins[name]
    except KeyError:
        raise UnknownPlugin(name, plugins) from None
