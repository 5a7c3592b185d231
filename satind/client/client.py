"""The client side: submit a run to a peer, follow its progress, fetch its result.

A client is a party with the role "client" in the handshake; it is not a member, and peers
answer it on the connection it opened.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import trio

from satind import trace
from satind._trio import single_errors
from satind.client.errors import BadArguments, NoSuchPlugin, NotAllowed, Refused, VersionMismatch
from satind.client.errors import PeerUnavailable as PeerUnavailable
from satind.client.errors import RequestFailed as RequestFailed
from satind.client.errors import RunLost as RunLost
from satind.client.files import ClientFiles, NotAnArgument
from satind.config import Config
from satind.net import messages as m
from satind.net import tls
from satind.net.requests import Requests
from satind.net.transport import Address, Connection, Identity, TcpTransport, parse_address
from satind.plugin import PluginFailed, UsageError

log = logging.getLogger(__name__)
# The type a peer names a core.runs.VersionMismatch by (work/errors.py error_info): not any
# type whose name ends so (a plugin's own SchemaVersionMismatch raised in its parse).
VERSION_MISMATCH = "satind.core.runs.VersionMismatch"


def to_stderr(line: str) -> None:
    """Where a client shows a run's output when no console does."""
    print(line, file=sys.stderr, flush=True)


class NoOutput(Exception):
    """No peer has the output of that run (no such run)."""


class SubmitRefused(Refused):
    """The peer refused the submission; ``info`` says why."""

    def __init__(self, info: m.ErrorInfo) -> None:
        super().__init__(info.message)
        self.info = info


@dataclass
class _RunWaiter:
    event: trio.Event
    result: m.RunResult | None = None


class Client:
    def __init__(self, transport: TcpTransport, conn: Connection, peer: str, cfg: Config) -> None:
        self.transport = transport
        self.conn = conn
        self.peer = peer
        self.cfg = cfg
        self.requests = Requests()
        # Where it is connected, and other members' addresses from the last accepted submit
        # or resume: where to follow a run if this peer is lost.
        self.address: Address | None = None
        self.contacts: list[Address] = []
        self._results: dict[str, _RunWaiter] = {}
        self._closed = trio.Event()

    def _on_message(self, conn: Connection, msg: m.Message) -> None:
        if isinstance(msg, m.RunResult):
            waiter = self._results.setdefault(msg.run_id, _RunWaiter(trio.Event()))
            waiter.result = msg
            waiter.event.set()
        elif isinstance(msg, m.ANSWER_TYPES):
            self.requests.resolve(msg.req, msg)  # type: ignore[attr-defined]

    def _on_closed(self, conn: Connection) -> None:
        if conn is self.conn:
            self._closed.set()

    async def submit(
        self,
        plugin: str,
        argv: list[str],
        code_hash: str = "",
        check: bool = True,
        files: ClientFiles | None = None,
        entry: str = "",
        values: bytes = b"",
        code: dict[str, bytes] | None = None,
        weight: float = 1.0,
    ) -> str:
        """Submit a run; returns its id (``contacts`` then holds where else to follow it).
        With ``entry``, the run is of that function of the plugin's module with the encoded
        argument tuple ``values`` (and ``argv`` is empty). With ``code``, the plugin's code is
        shipped with the run (plugin/shipped.py; ``code_hash`` is its hash).
        When the master asks for input files the arguments name, ``files`` sends them (the
        submission is made again with their content); without it, the run is refused.

        Raises:
            UsageError: bad arguments (the message carries the plugin's usage), or an input
                file that cannot be read here.
            UnknownPlugin: the peer has no such plugin.
            SubmitRefused: any other refusal.
            PeerUnavailable: no answer.
        """
        inputs: dict[str, bytes] = {}
        while True:
            req = self.requests.new()
            submit = m.Submit(
                req, plugin, argv, code_hash, check, inputs, entry, values, code or {}, weight
            )
            if not self.conn.post(submit):
                if self.conn.closed:
                    raise PeerUnavailable(f"lost the connection to {self.peer}")
                size = sum(len(data) for data in inputs.values())
                raise UsageError(
                    f"the submission (its arguments and {size:,} bytes of input files) does "
                    "not fit in one message (net.max_frame_bytes): send smaller files, or "
                    "have the operator put them in the peers' input directory ([files] "
                    "input_dir)"
                )
            wait = self.cfg.client.timeout_s
            if code:  # the master vets and loads the code first (plugin/shipped.py)
                wait += self.cfg.plugins.import_timeout_s + self.cfg.plugins.vetter_start_timeout_s
            reply = await self._wait_reply(req, wait)
            assert isinstance(reply, m.Submitted)
            # Each round sends at least one file more, and only files the arguments name
            # (files.send refuses others): this ends.
            missing = [name for name in reply.needs if name not in inputs]
            if reply.error is None or files is None or not missing:
                break
            try:
                inputs.update(files.send(missing))
            except NotAnArgument as exc:
                raise SubmitRefused(m.ErrorInfo("NotAnArgument", str(exc))) from None
        if reply.error is not None:
            if reply.error.type.endswith("UsageError"):
                raise BadArguments(reply.error.message)
            if reply.error.type.endswith("UnknownPlugin"):
                raise NoSuchPlugin(plugin, reply.error.message)
            if reply.error.type == "NotAllowed":
                raise NotAllowed(reply.error.message)
            if reply.error.type == VERSION_MISMATCH:
                raise VersionMismatch(reply.error.message)
            if reply.error.type.endswith("PluginFailed"):
                raise PluginFailed(reply.error.message)
            raise SubmitRefused(reply.error)
        self._accepted(reply)
        return reply.run_id

    def _accepted(self, reply: m.Submitted) -> None:
        self._results.setdefault(reply.run_id, _RunWaiter(trio.Event()))
        self.contacts = []
        for text in reply.contacts:
            with contextlib.suppress(ValueError):
                self.contacts.append(parse_address(text))

    async def resume(self, run_id: str) -> str:
        """Resume a run from the checkpoint logs the peer can read; returns its id.

        Raises:
            SubmitRefused: no checkpoint of the run there, or it cannot run it.
            PeerUnavailable: no answer.
        """
        req = self.requests.new()
        self.conn.post(m.ResumeRequest(req, run_id))
        # Loading the logs takes time on a big checkpoint: wait longer than for a submit.
        reply = await self._wait_reply(req, self.cfg.client.resume_timeout_s)
        assert isinstance(reply, m.Submitted)
        if reply.error is not None and reply.error.type == "NotAllowed":
            raise NotAllowed(reply.error.message)
        if reply.error is not None and reply.error.type == VERSION_MISMATCH:
            raise VersionMismatch(reply.error.message)
        if reply.error is not None:
            raise SubmitRefused(reply.error)
        self._accepted(reply)
        return reply.run_id

    async def _wait_reply(self, req: int, seconds: float) -> m.Message:
        reply = None
        async with trio.open_nursery() as nursery:

            async def closed() -> None:
                await self._closed.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(closed)
            reply = await self.requests.reply_within(req, seconds)
            nursery.cancel_scope.cancel()
        if reply is None:
            raise PeerUnavailable(f"peer {self.peer} did not answer")
        if isinstance(reply, m.ErrorReply) and reply.error.type == "NotAllowed":
            raise NotAllowed(reply.error.message)
        if isinstance(reply, m.ErrorReply):
            raise RequestFailed(self.peer, reply.error)
        return reply

    async def result(self, run_id: str) -> m.RunResult:
        """Wait for a run's result from the connected peer (see ``follow`` for a client that
        must not lose the run with that peer).

        Raises:
            PeerUnavailable: the connection to the master closed first.
        """
        waiter = self._results.setdefault(run_id, _RunWaiter(trio.Event()))
        async with trio.open_nursery() as nursery:

            async def closed() -> None:
                await self._closed.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(closed)
            await waiter.event.wait()
            nursery.cancel_scope.cancel()
        if waiter.result is None:
            raise PeerUnavailable(f"lost the connection to {self.peer} before run {run_id} ended")
        return waiter.result

    def follow_addresses(self) -> list[Address]:
        """Where to ask for a run once this peer is lost: its own address first (a daemon
        restarts a lost peer there), then the contacts the run came with."""
        first = [self.address] if self.address is not None else []
        return first + [a for a in self.contacts if a != self.address]

    async def progress(self, run_id: str, within_s: float) -> m.ProgressReply | None:
        """The run's progress, or None when no answer came in time (or an error)."""
        req = self.requests.new()
        self.conn.post(m.ProgressRequest(req, run_id))
        reply = _allowed(await self.requests.reply_within(req, within_s))
        return reply if isinstance(reply, m.ProgressReply) else None

    async def result_with_output(self, run_id: str, emit: Callable[[str], None]) -> m.RunResult:
        """The run's result, passing each line of its output (what its jobs print or log) to
        ``emit`` as it comes."""
        got: list[m.RunResult] = []
        failed: list[Exception] = []
        done = trio.Event()
        async with trio.open_nursery() as nursery:

            async def output() -> None:
                with contextlib.suppress(PeerUnavailable, RequestFailed, NoOutput, NotAllowed):
                    await self.follow_logs(run_id, emit, self.cfg, done)

            nursery.start_soon(output)
            try:
                got.append(await self.result(run_id))
            except Exception as exc:  # raised below, as itself (not in an exception group)
                failed.append(exc)
                nursery.cancel_scope.cancel()
            done.set()
        if failed:
            raise failed[0]
        return got[0]

    async def logs(self, run_id: str, start: int, within_s: float) -> m.LogsReply | None:
        """A run's output from line ``start`` on, or None when no answer came in time."""
        req = self.requests.new()
        self.conn.post(m.LogsRequest(req, run_id, start))
        reply = _allowed(await self.requests.reply_within(req, within_s))
        return reply if isinstance(reply, m.LogsReply) else None

    async def follow_logs(
        self,
        run_id: str,
        emit: Callable[[str], None],
        cfg: Config,
        done: trio.Event | None = None,
    ) -> None:
        """Pass each new line of a run's output to ``emit``: until ``done`` is set and the
        last lines are in (peers send theirs every ``run.log_flush_s``), or until the run is
        over when ``done`` is None."""
        poll_s = cfg.run.log_flush_s
        start, last = 0, False
        while True:
            reply = await self.logs(run_id, start, cfg.client.timeout_s)
            if reply is not None:
                for line in reply.lines:
                    emit(line)
                start = reply.next
                if reply.error and not reply.lines:
                    raise NoOutput(reply.error)
            if last:
                return
            with trio.move_on_after(poll_s):
                if done is not None:
                    await done.wait()
                else:
                    await trio.sleep_forever()
            if (done is not None and done.is_set()) or (
                done is None and reply is not None and reply.over
            ):
                await trio.sleep(cfg.run.log_tail_s)  # every peer's last lines reach the master
                last = True

    async def trace(self, run_id: str) -> list[m.TraceReply]:
        """Every member's trace of a run (satind/trace.py): the connected peer's, then each
        other member's, relayed by it, one reply per peer (a member that did not answer
        gives a reply with ``error`` set).

        Raises:
            PeerUnavailable: the connected peer did not answer.
            RequestFailed: it failed to.
        """
        replies = [await self._trace_of(run_id, "")]
        for name in replies[0].members:
            replies.append(await self._trace_of(run_id, name))
        return replies

    async def _trace_of(self, run_id: str, peer: str) -> m.TraceReply:
        req = self.requests.new()
        self.conn.post(m.TraceRequest(req, run_id, peer))
        reply = await self._wait_reply(req, self.cfg.client.timeout_s)
        assert isinstance(reply, m.TraceReply)
        return reply

    def shutdown(self, reason: str) -> None:
        self.conn.post(m.Shutdown(reason))

    async def status(self, within_s: float | None = None, deep: bool = True) -> m.StatusReply:
        """Every member's status and every run's, as the connected peer gathers them
        (``deep=False``: the connected peer's own line, then its view of the others).

        Raises:
            PeerUnavailable: no answer.
        """
        req = self.requests.new()
        self.conn.post(m.StatusRequest(req, deep))
        reply = await self._wait_reply(req, within_s or self.cfg.client.timeout_s)
        assert isinstance(reply, m.StatusReply)
        return reply

    async def fetch_result(self, run_id: str, wait: bool, within_s: float) -> m.ResultReply:
        """A run's result from wherever it is kept (the connected peer asks the master).

        Raises:
            PeerUnavailable: no answer (``within_s`` does not apply with ``wait``).
        """
        req = self.requests.new()
        self.conn.post(m.ResultRequest(req, run_id, wait))
        reply = await self._wait_reply(req, float("inf") if wait else within_s)
        assert isinstance(reply, m.ResultReply)
        return reply

    async def history(
        self,
        run_id: str = "",
        states: Sequence[str] = (),
        since: float = 0.0,
        limit: int = 20,
    ) -> m.HistoryReply:
        """Runs from the whole system's run history (node/history.py), newest first: one
        run (``run_id``, its log tail included) or the newest ``limit`` that ended after
        ``since`` (wall-clock seconds) in ``states``; the runs going on are listed too.

        Raises:
            PeerUnavailable: no answer.
        """
        req = self.requests.new()
        self.conn.post(m.HistoryRequest(req, run_id, list(states), since, limit))
        reply = await self._wait_reply(req, self.cfg.client.timeout_s)
        assert isinstance(reply, m.HistoryReply)
        return reply

    async def plugins(self, reload: bool = False) -> m.PluginsReply:
        """Every member's plugins (after each rescanned its plugin paths, with ``reload``).

        Raises:
            PeerUnavailable: no answer.
        """
        req = self.requests.new()
        self.conn.post(m.PluginsRequest(req, True, reload))
        # The peer asks every member, each within client.timeout_s: allow for that.
        reply = await self._wait_reply(req, 2 * self.cfg.client.timeout_s)
        assert isinstance(reply, m.PluginsReply)
        return reply

    async def control(self, msg: m.Message, within_s: float | None = None) -> m.ControlReply:
        """Send a DrainRequest or StopRequest (built with ``self.requests.new()``)."""
        self.conn.post(msg)
        wait = within_s or self.cfg.client.timeout_s
        reply = await self._wait_reply(msg.req, wait)  # type: ignore[attr-defined]
        assert isinstance(reply, m.ControlReply)
        return reply


def _allowed(reply: m.Message | None) -> m.Message | None:
    """The reply, unless it says the client may not ask (then NotAllowed is raised)."""
    if isinstance(reply, m.ErrorReply) and reply.error.type == "NotAllowed":
        raise NotAllowed(reply.error.message)
    return reply


@asynccontextmanager
async def connect(
    address: Address, cfg: Config, credentials: tls.Credentials | None, peer: str = ""
) -> AsyncIterator[Client]:
    """A client connected to the peer at ``address`` (mutual TLS with ``credentials``).

    Raises:
        PeerUnavailable: cannot connect.
    """
    base = credentials.name if credentials is not None else "client"
    name = f"{base}{tls.CLIENT_SEPARATOR}{secrets.token_hex(4)}"
    holder: list[Client] = []

    def on_message(conn: Connection, msg: m.Message) -> None:
        holder[0]._on_message(conn, msg)

    def on_closed(conn: Connection) -> None:
        if holder:
            holder[0]._on_closed(conn)

    transport = TcpTransport(
        Identity(name, "", "client"),
        cfg.net,
        on_message,
        on_closed=on_closed,
        credentials=credentials,
    )
    # The body's exceptions come out of the transport's nursery one by one, not wrapped in a
    # group: callers catch PeerUnavailable and the like as they would anywhere else.
    with single_errors():
        async with trio.open_nursery() as nursery:
            await nursery.start(transport.run, None)
            try:
                conn = await transport.dial(address, expect=peer or None)
            except Exception as exc:
                raise PeerUnavailable(
                    f"cannot connect to {peer or address} at {address}: {exc}"
                ) from exc
            client = Client(transport, conn, conn.remote_name, cfg)
            client.address = address
            holder.append(client)
            try:
                yield client
            finally:
                nursery.cancel_scope.cancel()


async def save_trace(client: Client, run_id: str, path: Path) -> None:
    """Fetch a run's trace from every member and write it to ``path`` (Chrome JSON); say on
    stderr what was written, or why not (the run's result stands either way)."""
    try:
        replies = await client.trace(run_id)
    except (PeerUnavailable, RequestFailed) as exc:
        to_stderr(f"satind: no trace of run {run_id}: {exc}")
        return
    for reply in replies:
        if reply.error:
            to_stderr(f"satind: trace of run {run_id}: {reply.error}")
    peers = [(r.peer, r.events, r.dropped) for r in replies if not r.error]
    try:
        to_stderr("satind: " + trace.save(path, peers, run_id))
    except OSError as exc:
        to_stderr(f"satind: cannot write the trace to {path}: {exc}")
