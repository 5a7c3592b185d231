"""The Python client API, synchronous form: ``satind.connect(...)`` and ``satind.run_local``
for scripts and notebooks, made of the async form (client/api.py).

Each connection runs its own trio loop in a thread of its own (``Loop``), and every method
is a call into that loop that blocks the caller until it is answered. So it works the same
in a plain script and where an event loop already runs in the caller's thread (Jupyter's
asyncio loop): nothing runs on the caller's loop. The only things shared between the
caller's thread and the loop's are the calls themselves, handed over by trio's
``from_thread`` (a queue), and their answers.

Ctrl-C while a call waits interrupts the wait, not the run: the run goes on (as with Ray's
``ray.get``); ``run.cancel()`` stops it.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import sys
import threading
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Sequence,
)
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import trio

from satind import config as config_mod
from satind._trio import single_errors
from satind.client import api, local
from satind.client import client as remote
from satind.client.api import Outcome, PeerInfo, RunInfo, RunRecord
from satind.client.errors import PeerUnavailable, Timeout
from satind.client.submission import Ship
from satind.plugin.shipped import Bundle
from satind.vetting import VETTER_MODULE

T = TypeVar("T")


class Loop:
    """A trio loop in a thread of its own, running ``main(ready)`` until ``close``; ``call``
    runs an async function in it from any other thread and returns what it returned."""

    def __init__(self, main: Callable[[Callable[[], None]], Awaitable[None]], label: str) -> None:
        self._token: trio.lowlevel.TrioToken | None = None
        self._ready = threading.Event()
        self._stop: trio.Event | None = None
        self._failed: BaseException | None = None
        self._nursery: trio.Nursery | None = None

        async def body() -> None:
            self._token = trio.lowlevel.current_trio_token()
            self._stop = trio.Event()
            async with trio.open_nursery() as nursery:
                self._nursery = nursery

                async def stop_when_asked() -> None:
                    assert self._stop is not None
                    await self._stop.wait()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(stop_when_asked)
                await main(self._ready.set)
                nursery.cancel_scope.cancel()

        def thread() -> None:
            try:
                with single_errors():
                    trio.run(body)
            except BaseException as exc:  # handed to the caller by start()
                self._failed = exc
            finally:
                self._ready.set()

        self._thread = threading.Thread(target=thread, name=label, daemon=True)

    def start(self) -> None:
        """Start the loop and wait until ``main`` says it is ready.

        Raises:
            what ``main`` raised before it was ready.
        """
        self._thread.start()
        self._ready.wait()
        if self._failed is not None:
            self._thread.join()
            raise self._failed

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``await fn(*args)`` in the loop. Ctrl-C while it waits stops the wait here and
        what it was doing there (a run it waited for goes on)."""
        token = self._token
        if token is None or not self._thread.is_alive():
            raise RuntimeError("this satind connection is closed")
        scopes: list[trio.CancelScope] = []

        async def cancellable() -> T:
            with trio.CancelScope() as scope:
                scopes.append(scope)
                return await fn(*args)
            raise RuntimeError("cancelled")  # only after Ctrl-C below: nobody waits for it

        try:
            with single_errors():
                return trio.from_thread.run(cancellable, trio_token=token)
        except KeyboardInterrupt:
            for scope in scopes:
                with contextlib.suppress(trio.RunFinishedError):
                    trio.from_thread.run_sync(scope.cancel, trio_token=token)
            raise

    def spawn(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Start ``fn()`` in the loop, in the background; it is cancelled at ``close``."""
        token, nursery = self._token, self._nursery
        if token is None or nursery is None or not self._thread.is_alive():
            raise RuntimeError("this satind connection is closed")
        if threading.current_thread() is self._thread:  # a done-callback, run by the loop
            nursery.start_soon(fn)
        else:
            trio.from_thread.run_sync(nursery.start_soon, fn, trio_token=token)

    def close(self) -> None:
        if self._token is not None and self._thread.is_alive() and self._stop is not None:
            with contextlib.suppress(trio.RunFinishedError):  # it ended meanwhile
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()


async def within(
    limit_s: float | None, fn: Callable[[], Awaitable[T]], what: str = "the call"
) -> T:
    """``fn()``, or Timeout after ``limit_s`` seconds (None: no limit)."""
    try:
        with trio.fail_after(limit_s if limit_s is not None else float("inf")):
            return await fn()
    except trio.TooSlowError:
        raise Timeout(f"{what} did not end within {limit_s:g} s; it goes on") from None


class SyncRun:
    """A run (see ``api.Run``); each method blocks until answered."""

    def __init__(self, loop: Loop, run: api.Run) -> None:
        self._loop = loop
        self._run = run
        self.id = run.id
        # The outcome once it came, or how the run failed: asked again (``outcome()`` after
        # ``result()``), it is answered at once, without a second progress bar.
        self._outcome: Outcome | None = None
        self._failed: Exception | None = None
        # Its end as a concurrent.futures.Future of its Outcome, once something waits for it
        # in the background (``done``, ``add_done_callback``, ``satind.wait``...): completed by
        # a task in the loop, read from any thread (a Future is made for that).
        self._ended: concurrent.futures.Future[Outcome] | None = None
        self._watch_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<satind.Run {self.id}>"

    @property
    def ended(self) -> concurrent.futures.Future[Outcome]:
        """A ``concurrent.futures.Future`` of the run's ``Outcome``, done when the run ends
        (its exception: what ``outcome()`` raises). What ``satind.as_completed`` and
        ``satind.wait`` wait on; ``concurrent.futures.wait`` takes it too."""
        with self._watch_lock:
            ended = self._ended
            if ended is not None:
                return ended
            ended = concurrent.futures.Future()
            ended.set_running_or_notify_cancel()
        # Started outside the lock: spawning waits for the loop thread, whose callbacks may
        # ask this run's ``done()`` meanwhile. Two threads asking at once may both start a
        # watcher: the first stored is kept, the other's future is dropped (harmless).
        self._loop.spawn(lambda: self._watch(ended))
        with self._watch_lock:
            if self._ended is None:
                self._ended = ended
            return self._ended

    async def _watch(self, ended: concurrent.futures.Future[Outcome]) -> None:
        try:
            outcome = await self._run.outcome()
        except Exception as exc:  # the run's own end (cancelled, failed, lost...)
            ended.set_exception(exc)
        except BaseException:  # the connection closed under it
            ended.set_exception(
                PeerUnavailable(f"the connection closed before run {self.id} ended")
            )
            raise
        else:
            ended.set_result(outcome)

    def done(self) -> bool:
        """Whether the run has ended (its outcome, or how it failed, is here)."""
        return self._outcome is not None or self._failed is not None or self.ended.done()

    def add_done_callback(self, fn: Callable[[SyncRun], object]) -> None:
        """Call ``fn(run)`` once the run has ended (at once if it has). It runs in the
        connection's own thread: keep it short, and use only the run's ``result()``,
        ``outcome()``, ``done()`` and ``id`` there (answered at once), not calls that ask a
        peer."""
        self.ended.add_done_callback(lambda _: fn(self))

    def info(self) -> RunInfo:
        return self._loop.call(self._run.info)

    def status(self) -> str:
        return self._loop.call(self._run.status)

    def progress(self) -> float:
        return self._loop.call(self._run.progress)

    def waiting(self) -> bool:
        return self._loop.call(self._run.waiting)

    def cancel(self) -> None:
        self._loop.call(self._run.cancel)

    def result(self, timeout: float | None = None, progress: bool | None = None) -> Any:
        """The run's value (see ``api.Run.result``). ``progress``: draw a progress bar while
        waiting (on stderr in a terminal, as a widget in a notebook); None (the default):
        when stderr is a terminal or this runs in a Jupyter kernel.

        Raises:
            Timeout: the run did not end within ``timeout`` seconds (it goes on).
        """
        return self.outcome(timeout, progress).value

    def outcome(self, timeout: float | None = None, progress: bool | None = None) -> Outcome:
        """See ``api.Run.outcome``; ``Timeout`` and ``progress`` as ``result``."""
        if self._failed is not None:
            raise self._failed.with_traceback(None)
        if self._outcome is None and self._ended is not None and self._ended.done():
            try:
                self._outcome = self._ended.result()
            except (Timeout, PeerUnavailable):
                raise  # not the run's end: asked again, waited for again
            except Exception as exc:
                self._failed = exc
                raise
        if self._outcome is None:
            try:
                self._outcome = self._wait(timeout, progress)
            except (Timeout, PeerUnavailable):
                raise  # the run goes on, or the answer may come: asked again, waited for again
            except Exception as exc:  # the run is over (its job's exception, cancelled...)
                self._failed = exc
                raise
        return self._outcome

    def _wait(self, timeout: float | None, progress: bool | None) -> Outcome:
        if not (progress if progress is not None else _interactive()):
            got: Outcome = self._loop.call(within, timeout, self._run.outcome, f"run {self.id}")
            return got
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TimeElapsedColumn

        with Progress(
            f"run {self.id}",
            BarColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True),
        ) as bar:
            task = bar.add_task("", total=1.0)

            def update(done: float) -> None:
                bar.update(task, completed=done)

            async def watched() -> Outcome:
                return await self._run.outcome(update)

            shown: Outcome = self._loop.call(within, timeout, watched, f"run {self.id}")
            return shown

    def logs(self, follow: bool = False, timestamps: bool = False) -> Iterator[str]:
        """The run's output lines; with ``follow``, until the run ends; with ``timestamps``,
        each begins with when it was written (see ``api.Run.logs``)."""
        lines = self._run.logs(follow, timestamps)
        assert isinstance(lines, AsyncGenerator)

        async def next_line() -> str | None:
            try:
                line: str = await lines.__anext__()
                return line
            except StopAsyncIteration:
                return None

        try:
            while (line := self._loop.call(next_line)) is not None:
                yield line
        finally:
            self._loop.call(lines.aclose)


class SyncCluster:
    """A connection to a cluster (see ``api.Cluster``); a context manager that closes it."""

    def __init__(
        self, where: api.Target | Callable[[], AbstractAsyncContextManager[api.Cluster]]
    ) -> None:
        """``where``: the peer to connect to, or what opens a cluster (local peers)."""
        self._cluster: api.Cluster | None = None

        @asynccontextmanager
        async def connected(where: api.Target) -> AsyncIterator[api.Cluster]:
            credentials = where.credentials if where.cfg.net.tls else None
            async with remote.connect(where.address, where.cfg, credentials) as client:
                yield api.Cluster(client, where.cfg)

        async def main(ready: Callable[[], None]) -> None:
            opened = connected(where) if isinstance(where, api.Target) else where()
            async with opened as cluster:
                self._cluster = cluster
                ready()
                await trio.sleep_forever()

        self._loop = Loop(main, "satind-client")
        self._loop.start()

    @property
    def cluster(self) -> api.Cluster:
        assert self._cluster is not None
        return self._cluster

    @property
    def peer(self) -> str:
        return self.cluster.peer

    def __enter__(self) -> SyncCluster:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (runs submitted go on)."""
        self._loop.close()

    def submit(
        self, what: Any, *args: Any, check: bool = True, ship: Ship = None, weight: float = 1.0
    ) -> SyncRun:
        """See ``api.Cluster.submit``."""
        run = self._loop.call(
            lambda: self.cluster.submit(what, *args, check=check, ship=ship, weight=weight)
        )
        return SyncRun(self._loop, run)

    def submit_entry(
        self, plugin: str, entry: str, values: bytes, code: Bundle, code_hash: str
    ) -> SyncRun:
        """See ``api.Cluster.submit_entry``."""
        run = self._loop.call(
            lambda: self.cluster.submit_entry(plugin, entry, values, code, code_hash)
        )
        return SyncRun(self._loop, run)

    def run(self, what: Any, *args: Any, timeout: float | None = None) -> Any:
        """``submit`` then ``result`` (``Timeout`` past ``timeout`` seconds)."""
        return self.submit(what, *args).result(timeout)

    def get_run(self, run_id: str) -> SyncRun:
        return SyncRun(self._loop, self.cluster.get_run(run_id))

    def gather(self, runs: Iterable[SyncRun], timeout: float | None = None) -> list[Any]:
        """The values of ``runs``, in their order, once all have ended; the first failure in
        that order is raised (as ``result()`` raises it) once all have ended.

        Raises:
            Timeout: not all ended within ``timeout`` seconds (they go on).
        """
        runs = list(runs)
        if concurrent.futures.wait([run.ended for run in runs], timeout).not_done:
            raise Timeout(f"{len(runs)} runs did not all end within {timeout:g} s; they go on")
        return [run.result() for run in runs]

    def runs(self) -> list[RunInfo]:
        return self._loop.call(self.cluster.runs)

    def peers(self) -> list[PeerInfo]:
        return self._loop.call(self.cluster.peers)

    def history(
        self,
        states: Sequence[str] = (),
        since: float = 0.0,
        limit: int = 20,
        run_id: str = "",
    ) -> list[RunRecord]:
        return self._loop.call(lambda: self.cluster.history(states, since, limit, run_id))

    def drain(self, *peers: str, cluster: str = "", deadline: float | None = None) -> list[str]:
        return self._loop.call(
            lambda: self.cluster.drain(*peers, cluster=cluster, deadline=deadline)
        )

    def suspend(self, run_id: str) -> str:
        return self._loop.call(self.cluster.suspend, run_id)

    def resume(self, run_id: str) -> SyncRun:
        return SyncRun(self._loop, self._loop.call(self.cluster.resume, run_id))


def refuse_in_a_peer(what: str) -> None:
    """Refuse to start a client inside a peer or a vetting process: a shipped script's (or a
    module of functions') top level runs there on import, and would start one per peer.

    Raises:
        RuntimeError: this is such a process (the message says to guard the script).
    """
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if getattr(spec, "name", "") in ("satind.ops.child", VETTER_MODULE):
        raise RuntimeError(
            f"{what} in code a peer imports: the script's top level runs on the peers, so "
            'call it under `if __name__ == "__main__":` (as for ProcessPoolExecutor)'
        )


def _interactive() -> bool:
    """Whether someone watches: stderr is a terminal, or this is a Jupyter kernel."""
    return sys.stderr.isatty() or "ipykernel" in sys.modules


def connect(
    to: str | None = None,
    keys: str | os.PathLike[str] | None = None,
    *,
    name: str | None = None,
    config: str | os.PathLike[str] | config_mod.Config | None = None,
) -> SyncCluster:
    """Connect to the peer at ``to`` (HOST:PORT) with the client certificate in ``keys``;
    defaults: ``$SATIND_TO``, ``$SATIND_KEYS``, then the config's ``[client]`` section (see
    ``api.target``). Use it in a ``with`` block, or call ``close()``.

    Raises:
        PeerUnavailable: the peer cannot be reached; ValueError: bad address or keys.
        RuntimeError: called where a peer imports the script (no __main__ guard).
    """
    refuse_in_a_peer("satind.connect()")
    return SyncCluster(api.target(to, keys, name=name, config=config))


def run_local(
    what: Any,
    *args: Any,
    peers: int | None = None,
    plugin_path: Sequence[str | os.PathLike[str]] = (),
    config: str | os.PathLike[str] | config_mod.Config | None = None,
    timeout: float | None = None,
) -> Any:
    """Run on fresh local peers (the embedded default of ``satind run``) and return the
    value; see ``local.run_local_async``. Blocks; Ctrl-C stops the peers."""
    refuse_in_a_peer("satind.run_local()")
    got: list[Any] = []

    async def main(ready: Callable[[], None]) -> None:
        async def go() -> Any:
            paths = [Path(p) for p in plugin_path]
            return await local.run_local_async(
                what, *args, peers=peers, plugin_path=paths, config=config
            )

        got.append(await within(timeout, go, "the local run"))
        ready()

    loop = Loop(main, "satind-run-local")
    try:
        loop.start()
    except KeyboardInterrupt:
        loop.close()
        raise
    return got[0]
