"""The Plugin descriptor, the run kinds and the errors of a plugin's own code.

A plugin is an application: a spawnable entry function plus what satind needs to run it by
name — argument parsing with a usage message, the maximum branching factor (progress is
estimated from job ids with it), an optional independent check of the result, and an
optional report that turns the raw result into what the user sees. What is here is all the
core needs of a plugin, and it loads neither the compute side nor the plugin loader: the core
imports this module, never the package ``satind.plugin`` (finding, vetting and importing
plugin modules), which re-exports these names for everyone else.

The errors keep ``satind.plugin`` as their ``__module__``: an exception travels between peers,
and into users' messages, as ``module.qualname`` (satind/work/errors.py), and these names
stay what they were when the errors lived in one module ``satind/plugin.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

# A spawnable as the registry holds it (its name and function), not the author's API's class:
# importing that loads the compute side, which the core (that reads plugins through this
# module) must not (pyproject.toml, core-engine).
from satind.work.spawnables import Registered, is_spawnable


class UsageError(ValueError):
    """Bad plugin arguments. The message says what was wrong; satind adds the usage line."""

    __module__ = "satind.plugin"  # the name it travels under (see the module docstring)


class CheckFailed(AssertionError):
    """A plugin's independent check rejected a result."""

    __module__ = "satind.plugin"  # the name it travels under (see the module docstring)


class NotChecked(Exception):
    """Raised by a plugin's check that cannot verify this result independently (too large to
    compute again, no certificate to check): the run then says "not checked: <message>"
    instead of "ok". Say why, and up to what size the check does verify."""

    __module__ = "satind.plugin"  # the name it travels under (see the module docstring)


class PluginFailed(RuntimeError):
    """A plugin's own code raised outside a job: its ``parse`` with something other than a
    usage error, or its ``max_branching``. A bug in the plugin; the message says where."""

    __module__ = "satind.plugin"  # the name it travels under (see the module docstring)


# How a member gossips a plugin version whose requirements its environment lacks: this and
# why, instead of the code hash (plugin/requirements.py). It takes no part in its runs.
UNMET = "unmet:"
# What a usage line starts with: a plugin's arguments are parsed where the run starts (for
# `satind submit`, on the master), which cannot tell which command gave them.
USAGE = "satind run|submit"

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
        requires: what the plugin needs installed where it runs, as PEP 508 requirements
            (``("numpy>=1.26",)``); a peer that lacks one takes no part in its runs and says
            why (plugin/requirements.py).
        benchmark: optional, a small fixed piece of the application's own work (the Satin
            paper's "the actual application with a smaller input problem"), called with no
            arguments; self-adaptivity times it in CPU seconds on each peer of a run to
            compare the machines' speeds for this application (docs/operations.md). Keep it
            to a few milliseconds, the same work every call, using no spawn. Without it a
            fixed Python loop is timed instead.
    """

    name: str
    entry: Registered
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
    requires: tuple[str, ...] = ()
    benchmark: Callable[[], object] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not is_spawnable(self.entry):
            raise TypeError(
                f"plugin {self.name!r}: entry must be a @spawnable function, got {self.entry!r}"
            )
        if isinstance(self.max_branching, int) and self.max_branching < 1:
            raise ValueError(f"plugin {self.name!r}: max_branching must be >= 1")
        if isinstance(self.requires, str):
            raise TypeError(f"plugin {self.name!r}: requires is a list of requirements")
        if self.requires:
            # Imported only for a plugin that has requirements (plugin/requirements.py).
            from packaging.requirements import InvalidRequirement, Requirement

            for text in self.requires:
                try:
                    Requirement(text)
                except InvalidRequirement as exc:
                    raise ValueError(
                        f"plugin {self.name!r}: bad requirement {text!r}: {exc}"
                    ) from None

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
            raise UsageError(f"{self.name}: {exc}\nusage: {USAGE} {self.usage}") from None
        except (ValueError, TypeError, IndexError) as exc:
            raise UsageError(
                f"{self.name}: bad arguments {list(argv)!r} ({exc})\nusage: {USAGE} {self.usage}"
            ) from None
        except Exception as exc:
            raise PluginFailed(
                f"plugin {self.name}: its argument parser raised {type(exc).__name__}: {exc} "
                f"(arguments {list(argv)!r})"
            ) from exc

    def make_report(self, argv: Sequence[str], result: Any) -> Any:
        return result if self.report is None else self.report(argv, result)

    @property
    def home(self) -> str:
        """The name of the module that defines the plugin (as this process imported it)."""
        return self.module or self.entry.fn.__module__

    def function(self, qualname: str) -> Registered:
        """The @spawnable function ``qualname`` of the plugin's module: what a run submitted
        as a function with Python values starts with (the client API's ``submit(fn, ...)``).
        Only a divide-and-conquer plugin's module: the others' roots are satind's drivers.

        Raises:
            UsageError: there is no such spawnable function there, or the plugin is not of the
                divide-and-conquer kind.
        """
        if self.kind != "divide-and-conquer":
            raise UsageError(
                f"plugin {self.name} is an {self.kind} plugin: submit it by name with its "
                f"arguments (usage: {self.usage}), not as a function"
            )
        obj: Any = sys.modules.get(self.home)
        for part in qualname.split("."):
            # Names only, no dunders: a client names a function, not any object it can reach.
            ok = part.isidentifier() and not part.startswith("__")
            obj = getattr(obj, part, None) if ok else None
        if not is_spawnable(obj):
            raise UsageError(
                f"plugin {self.name}: its module has no @spawnable function {qualname!r} at "
                "its top level (a function submitted by value must be defined at the top "
                "level of the plugin's own file, and decorated with @satind.spawnable)"
            )
        found: Registered = obj
        return found


class UnknownPlugin(LookupError):
    __module__ = "satind.plugin"  # the name it travels under (see the module docstring)

    def __init__(self, name: str, available: Iterable[str], message: str = "") -> None:
        self.name = name
        self.available = sorted(available)
        super().__init__(
            message
            or f"unknown plugin {name!r}; available: {', '.join(self.available) or '(none)'}"
        )


def module_plugin(name: str, entry: Registered) -> Plugin:
    """A module of @spawnable functions with no ``PLUGIN``: a plugin by itself, named after
    the module, for runs submitted as functions from Python (``cluster.submit(fn, ...)``);
    ``entry`` is its first function. By name, with arguments, it refuses to run."""

    def parse(argv: Sequence[str]) -> tuple[Any, ...]:
        raise UsageError(
            f"{name} is a module of functions without a PLUGIN: submit one of its @spawnable "
            "functions from Python (docs/client.md), or give it a PLUGIN (docs/plugins.md)"
        )

    return Plugin(
        name=name,
        entry=entry,
        usage=f"(the functions of {name}.py, submitted from Python)",
        parse=parse,
        description=f"the @spawnable functions of {name}.py",
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


# -- what the plugin's own code made, as data the core takes (satind/plugin/hooks.py runs it) --


@dataclass(frozen=True)
class Parsed:
    """A submission's arguments, parsed and encoded by the plugin's own code."""

    plugin: Plugin
    args: tuple[Any, ...]
    encoded: bytes
    branching: int
    # The root's function when it is not the plugin's entry (RunInfo.entry).
    entry: str = ""


@dataclass(frozen=True)
class Verdict:
    """What the plugin's own code made of a run's value, on its master (RunResult.report,
    RunResult.check)."""

    report: bytes | None
    check: str
    # The report's output files (satind/files.py): to send, or kept here (name -> where).
    outputs: dict[str, bytes] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)
