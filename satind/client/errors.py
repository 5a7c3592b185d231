"""What the client API raises (docs/client.md "Errors"): one type per way a request or a run
fails, all under ``SatindError``, so a script catches what it can handle and nothing else.

A run whose job raised is special: ``Run.result()`` raises that exception *as itself* when
this process can rebuild it — a built-in type, a type the plugin registered
(``satind.register_type``), or a class of a module this process has imported already (the
plugin's own module, by the same file name) — with the remote traceback as a note. Otherwise
it raises ``RunFailed``, which carries the type's name, the message and the traceback.
"""

from __future__ import annotations

import builtins
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from satind.net import messages as m
from satind.plugin import UnknownPlugin, UsageError
from satind.plugin.importing import PATH_PACKAGE as PATH_PLUGIN_PACKAGE
from satind.plugin.importing import SHIPPED_PREFIX
from satind.work.errors import arguments, exception_from


class SatindError(Exception):
    """Anything the client API raises of its own."""


class RequestFailed(Exception):
    """The peer could not answer the request: its handler failed (``info`` says why)."""

    def __init__(self, peer: str, info: m.ErrorInfo) -> None:
        super().__init__(f"peer {peer} failed to answer: {info.type}: {info.message}")
        self.info = info


class Refused(SatindError):
    """A submission or a request the cluster refused; the message says why and what to do."""


class BadArguments(Refused, UsageError):
    """The plugin refused the run's arguments (the message carries its usage line). Also a
    ``satind.UsageError``, as the plugin's parse raises it."""


class NoSuchPlugin(Refused, UnknownPlugin):
    """No member has a plugin of that name (the message lists what the cluster has)."""

    def __init__(self, name: str, message: str) -> None:
        UnknownPlugin.__init__(self, name, [], message)


class VersionMismatch(Refused):
    """Members lack the plugin or have another version of it (the message names them and
    says how to fix it: the same plugin directory everywhere, or ship the code). Not cured
    by a retry, unlike a peer that is draining."""


class NotAllowed(Refused):
    """The client certificate's role does not allow the request (the message names the role
    it needs)."""


class PeerUnavailable(SatindError, ConnectionError):
    """The peer could not be reached, or closed the connection, or did not answer in time."""


class Timeout(SatindError, TimeoutError):
    """A wait with a ``timeout`` ran out; the run, if any, goes on."""


class RunCancelled(SatindError):
    """The run was cancelled (by ``Run.cancel()``, ``satind cancel`` or an operator)."""


class RunSuspended(SatindError):
    """The run was suspended; ``Cluster.resume(run_id)`` continues it from its checkpoints."""


class RunLost(SatindError):
    """No peer could give the run's result any more (the message says what was tried)."""


class RunFailed(SatindError):
    """A job of the run raised an exception this process cannot rebuild as itself.

    Attributes:
        run_id: the run.
        type_name: the original exception's qualified name, where it was raised.
        message: its message.
        remote_traceback: its traceback, as formatted on the peer.
    """

    def __init__(self, run_id: str, type_name: str, message: str, remote_traceback: str) -> None:
        super().__init__(f"run {run_id} failed: {type_name}: {message}")
        self.run_id = run_id
        self.type_name = type_name
        self.message = message
        self.remote_traceback = remote_traceback
        if remote_traceback:
            self.add_note("remote traceback:\n" + remote_traceback.rstrip())


def run_error(run_id: str, info: m.ErrorInfo) -> Exception:
    """The exception a run's result stands for: cancelled, suspended, or its job's failure
    (as itself when it can be rebuilt here, else ``RunFailed``)."""
    if info.type == "RunCancelled":
        return RunCancelled(info.message)
    if info.type == "RunSuspended":
        return RunSuspended(info.message)
    rebuilt = exception_from(info)
    if type(rebuilt).__name__ != "RemoteJobError":
        return rebuilt
    cls = _imported_class(info.type)
    if cls is not None:
        try:
            exc: Exception = cls(*arguments(info))
        except Exception:
            return RunFailed(run_id, info.type, info.message, info.traceback)
        if info.traceback:
            exc.add_note("remote traceback:\n" + info.traceback.rstrip())
        return exc
    return RunFailed(run_id, info.type, info.message, info.traceback)


def _imported_class(type_name: str) -> type[Exception] | None:
    """An exception class named ``module.qualname`` on a peer, from a module this process has
    imported already (never importing one): the same module name, or, for a plugin file the
    peers import as ``satind_path_plugins.<stem>`` (or shipped, as
    ``satind_shipped_<hash>.<stem>``), a module of this process named ``<stem>``
    (or ending in ``.<stem>``, or run from ``<stem>.py`` as ``__main__``): the plugin file
    the script imported, or is."""
    module_name, _, qualname = type_name.rpartition(".")
    while module_name and module_name not in sys.modules:
        # A nested class: "mod.Outer.Inner" has module "mod", qualname "Outer.Inner".
        module_name, _, outer = module_name.rpartition(".")
        qualname = f"{outer}.{qualname}"
    candidates = [sys.modules[module_name]] if module_name in sys.modules else []
    package, _, rest = type_name.partition(".")
    if package == PATH_PLUGIN_PACKAGE or package.startswith(SHIPPED_PREFIX):
        stem, _, qualname = rest.partition(".")
        candidates = [
            module
            for name, module in list(sys.modules.items())
            if module is not None
            and (name == stem or name.endswith("." + stem) or _file_stem(module) == stem)
        ]
    for module in candidates:
        obj: Any = module
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
        if isinstance(obj, type) and issubclass(obj, Exception) and obj is not builtins.Exception:
            return obj
    return None


def _file_stem(module: ModuleType) -> str:
    path = getattr(module, "__file__", None)
    return Path(path).stem if isinstance(path, str) else ""
