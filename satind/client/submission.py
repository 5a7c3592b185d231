"""What a submission carries (client/api.py): a plugin name with command-line arguments, or
one of a plugin's @spawnable functions with its Python values encoded; and the plugin's code
when it is shipped with the run (plugin/shipped.py). Decided here, on the client, before
anything is sent: what cannot travel is refused at once, saying why.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from satind import config as config_mod
from satind.api import Spawnable
from satind.client.errors import BadArguments
from satind.descriptor import module_plugin
from satind.net import codec
from satind.plugin import Plugin, is_plugin_name, shipped

# The bytes a Submit needs besides its arguments' values (ids, names, the message's frame).
SUBMIT_OVERHEAD = 4096


def submission(what: Any, args: Sequence[Any], max_frame: int) -> tuple[str, list[str], str, bytes]:
    """What to submit for ``cluster.submit(what, *args)``: (plugin name, argv, entry, values).

    Raises:
        TypeError: ``what`` is neither a plugin name nor a @spawnable function, or a plugin
            name with arguments that are not strings or numbers.
        ValueError: the function's module defines no plugin.
        BadArguments: the values cannot travel (a type the codec does not carry, too large).
    """
    if isinstance(what, str):
        bad = [a for a in args if not isinstance(a, (str, int, float)) or isinstance(a, bool)]
        if bad:
            raise TypeError(
                f"a run submitted by plugin name takes command-line arguments (strings, as "
                f"`satind submit` would send them), not {type(bad[0]).__name__}: to pass "
                "Python values, submit the plugin's @spawnable function itself"
            )
        return what, [str(a) for a in args], "", b""
    if not isinstance(what, Spawnable):
        raise TypeError(
            f"submit takes a plugin name or a @satind.spawnable function, not {what!r} "
            "(decorate the function with @satind.spawnable, in a plugin's file)"
        )
    plugin = plugin_of(what)
    qualname = what.fn.__qualname__
    try:
        values = codec.encode_value(tuple(args), max_frame - SUBMIT_OVERHEAD)
    except codec.EncodeError as exc:
        raise BadArguments(
            f"the arguments of {qualname} cannot be sent: {exc} (large inputs: see "
            "docs/plugins.md 'Inputs and outputs')"
        ) from None
    return plugin.name, [], qualname, values


# What ``submit(..., ship=...)`` takes: a directory, a module, True (the function's own
# plugin directory), or None (do not ship).
Ship = str | os.PathLike[str] | types.ModuleType | bool | None


def shipment(what: Any, ship: Ship, cfg: config_mod.Config) -> tuple[dict[str, bytes] | None, str]:
    """The code to ship with a submission and its hash; (None, "") for none.

    Raises:
        ValueError: nothing to ship there (not a directory, no plugin file, too large), or
            ``ship=True`` for a plugin name (name the directory).
    """
    if ship is None or ship is False:
        return None, ""
    if ship is True:
        if not isinstance(what, Spawnable):
            raise ValueError(
                "ship=True ships a submitted function's plugin directory: for a "
                "plugin name, give ship=DIR"
            )
        module = sys.modules.get(plugin_of(what).home)
        path = getattr(module, "__file__", None)
        if path is None:
            raise ValueError(
                f"cannot ship {what.fn.__qualname__}: its module has no file (a function "
                "defined in a notebook or with exec cannot travel); put it in a plugin file "
                "(docs/plugins.md) and import it from there"
            )
        directory = Path(path).parent
    elif isinstance(ship, types.ModuleType):
        path = getattr(ship, "__file__", None)
        if path is None:
            raise ValueError(f"cannot ship module {ship.__name__}: it has no file")
        directory = Path(path).parent
    else:
        directory = Path(ship).expanduser()
    limits = cfg.plugins
    try:
        code = shipped.pack(directory, limits.max_shipped_bytes, limits.max_shipped_files)
    except shipped.BadBundle as exc:
        raise ValueError(str(exc)) from None
    return code, shipped.bundle_hash(code)


def plugin_of(fn: Spawnable[Any]) -> Plugin:
    """The plugin whose module defines ``fn`` (its own, if one is; else the first there).

    Raises:
        ValueError: the function is not at a module's top level, or its module defines no
            plugin (the message says how to make one).
    """
    qualname = fn.fn.__qualname__
    module_name = fn.fn.__module__
    if "<locals>" in qualname:
        raise ValueError(
            f"{qualname} is defined inside a function: a function submitted to a cluster must "
            "be at the top level of a plugin's file"
        )
    module = sys.modules.get(module_name)
    found = (
        [
            value
            for name, value in vars(module).items()
            if is_plugin_name(name) and isinstance(value, Plugin)
        ]
        if module is not None
        else []
    )
    file = getattr(module, "__file__", None)
    if not found and module is not None and file is not None:
        # A module of functions without PLUGIN is a plugin by itself, named after its file
        # (the script's, for __main__), as the peers name it (plugin/importing.py).
        return module_plugin(Path(file).stem, fn)
    if not found:
        raise ValueError(
            f"{qualname} is not part of a plugin: its module ({module_name}) has no file (a "
            "notebook, python -c). Put the function in a .py file (docs/plugins.md) that every "
            "peer has (--plugin-path), or ship it (docs/client.md)"
        )
    own = [p for p in found if p.entry is fn]
    return (own or found)[0]


def plugin_dirs(what: Any) -> list[Path]:
    """The ``--plugin-path`` directories local peers need to run ``what``: none for a plugin
    name or a built-in's function (the peers have those); else the directory of the file
    that defines the function's plugin (the peers import it as a plugin file from there)."""
    if not isinstance(what, Spawnable):
        return []
    module = sys.modules.get(plugin_of(what).home)
    path = getattr(module, "__file__", None)
    if module is None or path is None or module.__name__.startswith("satind_plugins."):
        return []
    return [Path(path).resolve().parent]
