"""Loading the plugins a process can run: every candidate module vetted first (in a process
of its own, satind/vetting.py) unless a verdict on the same code is at hand, then the ones
that came through imported here; reloading the plugin directories; a plugin by name.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from satind.config import DEFAULT, PluginsConfig
from satind.descriptor import Plugin, UnknownPlugin
from satind.plugin.discovery import Candidate, find_candidates
from satind.plugin.importing import NoPlugin, builtin_plugins, describe_failure, load_one
from satind.vetting import vet
from satind.work.spawnables import forget_module

# Named as before the split into modules: what operators filter their logs by.
log = logging.getLogger("satind.plugin")


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
    candidates = find_candidates(plugin_paths, discovery.failures)
    discovery.verdicts = _vetted([c for c, _ in candidates], limits, vetted or {})
    found = builtin_plugins()
    for candidate, loader in candidates:
        error = discovery.verdicts[candidate.key].error
        if not error:
            try:
                found.extend(load_one(candidate, loader))
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
    candidates: Sequence[Candidate], limits: PluginsConfig, given: Mapping[str, Verdict]
) -> dict[str, Verdict]:
    """A verdict on each candidate: the given one for the same code, else a fresh one."""
    fresh = [
        c for c in candidates if c.key not in given or given[c.key].fingerprint != c.fingerprint
    ]
    verdicts = (
        vet(
            [c.unit for c in fresh],
            limits.import_timeout_s,
            limits.vetter_start_timeout_s,
            limits.vet_memory_mb,
        )
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
    candidates = [c for c, _ in find_candidates(plugin_paths, discovery.failures)]
    discovery.verdicts = _vetted(candidates, limits, vetted or {})
    for c in candidates:
        error = discovery.verdicts[c.key].error
        if error:
            discovery.failures.append(f"{c.label}: not loaded: {error}")
    return discovery


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
