"""``satind.Executor``: a ``concurrent.futures.Executor`` whose calls run on a satind cluster,
so that code written for ``ProcessPoolExecutor`` runs there with one line changed.

A submitted function is a plain one, at the top level of a module, as for a process pool. Its
module's directory (the script's, for ``__main__``) is shipped with each run, with a small
plugin of satind's own beside it (client/executor_plugin.py) whose jobs import the module and
call the function; a module installed where the peers run (the standard library, site
packages) is not shipped, only named. ``submit`` is one run; ``map`` over many items is one
divide-and-conquer run that splits the items in halves down to ``chunksize`` items a job, not
one run per item. Arguments and values travel through satind's codec (docs/client.md), not
pickle: what it does not carry is refused at ``submit``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import inspect
import os
import site
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from satind import config as config_mod
from satind.client.errors import BadArguments, Refused, Timeout
from satind.client.local import open_local_cluster
from satind.client.submission import SUBMIT_OVERHEAD
from satind.client.sync import SyncCluster, SyncRun, connect, refuse_in_a_peer
from satind.net import codec
from satind.plugin import shipped

PLUGIN_NAME = "executor"
PLUGIN_FILE = "satind_executor.py"
TEMPLATE = (Path(__file__).parent / "executor_plugin.py").read_text()
PLACEHOLDER = 'MODULE = ""  # set when shipped'
SHIPPED_LINE = "SHIPPED = False  # set when shipped: MODULE's file is shipped beside this one"


class RunFuture(concurrent.futures.Future[Any]):
    """A run's value as a ``concurrent.futures.Future``; ``run`` is the run (``satind.Run``).
    It stays pending until the run ends (``running()`` is False meanwhile); ``cancel()``
    cancels the run too."""

    def __init__(self, run: SyncRun) -> None:
        super().__init__()
        self.run = run

    def cancel(self) -> bool:
        if not super().cancel():
            return False
        with contextlib.suppress(Refused):  # it ended meanwhile: its value is dropped
            self.run.cancel()
        return True


class Executor(concurrent.futures.Executor):
    """Runs calls on a satind cluster (see the module's docstring and docs/client.md).

    Where, as ``satind.connect`` takes it: no argument, from ``$SATIND_TO``, ``$SATIND_KEYS``
    and the config file; ``to`` and ``keys``; an open ``cluster`` (left open at shutdown); or
    ``local=True`` (``peers``: how many; one per CPU by default), local peers of its own,
    started now and stopped at shutdown. The peers must accept shipped code and the client
    certificate have the "ship" grant (docs/operations.md, "Shipped code"); local peers do.
    """

    def __init__(
        self,
        to: str | None = None,
        keys: str | os.PathLike[str] | None = None,
        *,
        name: str | None = None,
        config: str | os.PathLike[str] | config_mod.Config | None = None,
        cluster: SyncCluster | None = None,
        local: bool = False,
        peers: int | None = None,
    ) -> None:
        refuse_in_a_peer("satind.Executor()")
        self._own = cluster is None
        if cluster is not None:
            self._cluster = cluster
        elif local or peers is not None:
            self._cluster = SyncCluster(
                lambda: open_local_cluster(peers, config=config, accept_shipped=True)
            )
        else:
            self._cluster = connect(to, keys, name=name, config=config)
        self._cfg = self._cluster.cluster.cfg
        self._bundles: dict[tuple[str, Path | None], tuple[shipped.Bundle, str]] = {}
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._lock = threading.Lock()  # submit and shutdown from any thread, as allowed
        self._shut = False

    @property
    def cluster(self) -> SyncCluster:
        return self._cluster

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> RunFuture:
        """Run ``fn(*args, **kwargs)`` on the cluster; a future of its value.

        Raises:
            TypeError: ``fn`` cannot be called there (a lambda, a nested function, one
                defined in a notebook); BadArguments: the values cannot travel.
        """
        module, directory, qualname = function_home(fn)
        values = self._encode((qualname, list(args), dict(kwargs)), qualname)
        run = self._submit(module, directory, "call", values)
        future = RunFuture(run)
        self._track(future)
        run.add_done_callback(lambda ended: _settle(future, ended))
        return future

    def map(
        self,
        fn: Callable[..., Any],
        *iterables: Iterable[Any],
        timeout: float | None = None,
        chunksize: int = 1,
    ) -> Iterator[Any]:
        """``fn`` over the items of ``iterables`` (as the built-in ``map``), as one run that
        splits the items in halves down to ``chunksize`` items a job; the values in order.
        The run is submitted now; the iterator waits for it. A call that raises fails the
        run: the iterator raises it at its first item.

        Raises:
            TimeoutError (``satind.Timeout``): at iteration, the run did not end within
                ``timeout`` seconds of this call.
        """
        if chunksize < 1:
            raise ValueError("chunksize must be at least 1")
        module, directory, qualname = function_home(fn)
        items = [list(item) for item in zip(*iterables, strict=False)]
        if not items:
            return iter(())
        values = self._encode((qualname, items, chunksize), qualname)
        run = self._submit(module, directory, "map_items", values)
        future = RunFuture(run)
        self._track(future)
        run.add_done_callback(lambda ended: _settle(future, ended))

        deadline = None if timeout is None else time.monotonic() + timeout  # from this call

        def values_of() -> Iterator[Any]:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                got = future.result(left)
            except concurrent.futures.TimeoutError:
                raise Timeout(
                    f"run {run.id} did not end within {timeout:g} s; it goes on"
                ) from None
            yield from got

        return values_of()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No more submissions; ``cancel_futures``: cancel the runs not ended; ``wait``: wait
        for the others. Closes the connection (stops the local peers) unless a cluster was
        given."""
        with self._lock:
            self._shut = True
            pending = list(self._pending)
        if cancel_futures:
            for future in pending:
                future.cancel()
        if wait:
            concurrent.futures.wait(pending)
        if self._own and (wait or not pending):
            self._cluster.close()

    def _track(self, future: RunFuture) -> None:
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._forget)

    def _forget(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def _encode(self, value: Any, qualname: str) -> bytes:
        try:
            return codec.encode_value(value, self._cfg.net.max_frame_bytes - SUBMIT_OVERHEAD)
        except codec.EncodeError as exc:
            raise BadArguments(f"the arguments of {qualname} cannot be sent: {exc}") from None

    def _submit(self, module: str, directory: Path | None, entry: str, values: bytes) -> SyncRun:
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot schedule new futures after shutdown")
            bundle = self._bundles.get((module, directory))
            if bundle is None:
                bundle = self._bundles[(module, directory)] = self._pack(module, directory)
        code, code_hash = bundle
        return self._cluster.submit_entry(PLUGIN_NAME, entry, values, code, code_hash)

    def _pack(self, module: str, directory: Path | None) -> tuple[shipped.Bundle, str]:
        plugin = TEMPLATE.replace(PLACEHOLDER, f"MODULE = {module!r}", 1)
        plugin = plugin.replace(SHIPPED_LINE, f"SHIPPED = {directory is not None}", 1)
        limits = self._cfg.plugins
        try:
            code = shipped.pack(
                directory,
                limits.max_shipped_bytes,
                limits.max_shipped_files,
                {PLUGIN_FILE: plugin.encode()},
            )
        except shipped.BadBundle as exc:
            raise ValueError(f"{exc}: move the script to a directory of its own") from None
        return code, shipped.bundle_hash(code)


def _settle(future: RunFuture, run: SyncRun) -> None:
    """The run ended: its future gets its value or its exception (unless cancelled)."""
    if not future.set_running_or_notify_cancel():
        return
    try:
        future.set_result(run.result())
    except Exception as exc:
        future.set_exception(exc)


def function_home(fn: Callable[..., Any]) -> tuple[str, Path | None, str]:
    """(the module the peers import, the directory to ship or None, the function's qualified
    name) of a function ``Executor`` is given.

    Raises:
        TypeError: it is not a function at a module's top level that has a file.
    """
    qualname = getattr(fn, "__qualname__", None)
    module_name = getattr(fn, "__module__", None)
    if not callable(fn) or not isinstance(qualname, str) or not isinstance(module_name, str):
        raise TypeError(f"satind.Executor runs functions, not {fn!r}")
    if inspect.ismethod(fn):  # its object would not travel: called there without it
        raise TypeError(
            f"{qualname} is a bound method: give satind.Executor a function at the top level "
            "of a module, and its object's data as arguments"
        )
    if "<" in qualname:
        raise TypeError(
            f"{qualname} cannot run on a cluster: define it with def at the top level of a "
            "module (as for ProcessPoolExecutor)"
        )
    if module_name in sys.builtin_module_names:
        return module_name, None, qualname  # pow, math.sqrt: every peer has them
    file = getattr(sys.modules.get(module_name), "__file__", None)
    if file is None:
        raise TypeError(
            f"{qualname} cannot run on a cluster: its module {module_name} has no file (a "
            "notebook or python -c); put it in a .py file and import it from there"
        )
    path = Path(file).resolve()
    if module_name == "__main__":
        return path.stem, path.parent, qualname
    if _installed(path):
        return module_name, None, qualname  # the peers import it as installed
    depth = module_name.count(".") + (1 if path.name == "__init__.py" else 0)
    return module_name, path.parents[depth], qualname


def _installed(path: Path) -> bool:
    """Whether ``path`` is a file of the standard library or of an installed package."""
    paths = sysconfig.get_paths()
    roots = {Path(paths[k]).resolve() for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots |= {Path(p).resolve() for p in [*site.getsitepackages(), site.getusersitepackages()]}
    return any(path.is_relative_to(root) for root in roots)
