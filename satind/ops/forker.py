"""Peer processes forked from a template that has imported satind already: a fork server, as
Android's zygote and multiprocessing's ``forkserver`` are.

Why: most of a peer's start is imports — about 0.7 s of CPU on a 2-core VM, a third of it
in making 170 dataclasses — and a machine starts peers often: at its start, at every crash
a daemon restarts, in every ``satind run``. Forked from the template, a peer is up in a few
milliseconds of CPU, and its pages are shared with the template until written.

How (``[launcher] fork_peers``; Linux only, else peers are started as before):

* The launcher starts ``python -P -m satind.ops.forker`` once, a child of its own, with one
  end of a Unix socket pair. The template imports what a peer imports, then, for each
  request (a peer's command line, and its two pipe ends passed with SCM_RIGHTS), forks a
  middle process which forks the peer and exits at once.
* The launcher makes itself a child subreaper (``prctl``) while it waits for the answer, so
  that the orphaned peer becomes its child, as an exec'd peer is: the launcher waits for it
  (a pidfd), learns its exit status, and signals it as before; ``ps`` shows it under the
  launcher, with the command line an exec'd peer would have (``setproctitle``). Only while it
  waits: a process a plugin started and left behind is adopted by init, as before.
* The peer starts a session of its own and runs ``child.child_main`` with its command line:
  everything after the fork is what an exec'd peer does. It never returns to the template's
  loop: it exits with its code once ``child_main`` ends.
* The template exits when its socket ends (its launcher is gone). If it fails, the launcher
  says so once and execs its peers from then on: nothing but time is lost.

The template imports no plugin, starts no thread and opens no connection, so the fork copies
nothing a peer must not share; the random module reseeds itself in a forked child.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import ctypes
import functools
import importlib
import json
import logging
import os
import runpy
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence

import trio

log = logging.getLogger(__name__)

FORKER_MODULE = "satind.ops.forker"
# prctl(2) option: orphaned descendants are re-parented to this process, not to init.
_PR_SET_CHILD_SUBREAPER = 36
# bytes: the largest request (a peer's command line) and answer.
MAX_MESSAGE = 65536


def supported() -> bool:
    """Whether peers can be forked here: Linux, with pidfds (5.3) and prctl."""
    return sys.platform == "linux" and hasattr(os, "pidfd_open")


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _subreaper(on: bool) -> None:
    """This process a child subreaper (or no more).

    Raises:
        OSError: prctl refused.
    """
    if _libc().prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(errno)}")


class ForkedProcess:
    """A peer forked from the template, now this process's child: the part of
    ``trio.Process`` a launcher uses (pid, returncode, wait, kill, send_signal)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._pidfd = os.pidfd_open(pid)
        self._code: int | None = None
        self._waiting = trio.Lock()

    @property
    def returncode(self) -> int | None:
        """Its exit code (negative: the signal that killed it), None while it runs."""
        if self._code is None:
            self._reap()
        return self._code

    def _reap(self) -> None:
        """Its exit status, if it has exited (never blocks: ``wait`` waits on the pidfd)."""
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:  # not ours (cannot be: it was adopted before the answer)
            pid, status = self.pid, 255 << 8
        if pid == self.pid:
            self._code = os.waitstatus_to_exitcode(status)
            os.close(self._pidfd)

    async def wait(self) -> int:
        async with self._waiting:
            while self.returncode is None:
                await trio.lowlevel.wait_readable(self._pidfd)
        assert self._code is not None
        return self._code

    def send_signal(self, sig: int) -> None:
        # By pidfd, while it is unreaped: never a signal to a process that took its pid.
        if self.returncode is None:
            signal.pidfd_send_signal(self._pidfd, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Forker:
    """The launcher's side: the template process and its socket. Use ``open_forker``."""

    def __init__(
        self, process: trio.Process, sock: trio.socket.SocketType, timeout_s: float
    ) -> None:
        self.process = process
        self.sock = sock
        self.timeout_s = timeout_s
        self._lock = trio.Lock()
        self.failed = ""

    async def spawn(self, argv: Sequence[str], fds: Sequence[int]) -> ForkedProcess:
        """A peer running ``argv`` (``python -P -m satind.ops.child ...``), with ``fds``
        (its control and report ends, named in ``argv`` by their numbers here) as its own.

        Raises:
            OSError: the template is gone, refused, or did not answer within ``timeout_s``
                (``failed`` says why from then on, and the template is killed: no late fork
                gets the same pipes as the peer started instead).
        """
        request = json.dumps({"argv": list(argv), "fds": list(fds)}).encode()
        async with self._lock:
            if self.failed:
                raise OSError(self.failed)
            answered = False
            try:
                _subreaper(True)
                try:
                    with trio.fail_after(self.timeout_s):
                        rights = array.array("i", fds).tobytes()
                        await self.sock.sendmsg(
                            [request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, rights)]
                        )
                        answer = await self.sock.recv(MAX_MESSAGE)
                    answered = True
                finally:
                    _subreaper(False)
                said = json.loads(answer) if answer else {"error": "the template exited"}
                if "pid" not in said:
                    raise OSError(str(said.get("error", said)))
                return ForkedProcess(int(said["pid"]))
            except trio.TooSlowError:
                self._give_up(f"the template did not answer within {self.timeout_s:g} s")
                raise OSError(self.failed) from None
            except (OSError, ValueError) as exc:
                self._give_up(str(exc))
                raise OSError(self.failed) from exc
            finally:
                if not answered and not self.failed:
                    # Cancelled between the question and its answer: a later answer would
                    # be taken for the next question's.
                    self._give_up("a request was cancelled before its answer")

    def _give_up(self, why: str) -> None:
        self.failed = f"the peers' fork server failed: {why}"
        with contextlib.suppress(ProcessLookupError, PermissionError):
            # Its process group: the template and any middle process forking right now.
            os.killpg(self.process.pid, signal.SIGKILL)

    async def aclose(self) -> None:
        self.sock.close()  # the template sees its socket end and exits
        with trio.move_on_after(5):
            await self.process.wait()
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()


@contextlib.asynccontextmanager
async def open_forker(
    enabled: bool, stdout: int, preload: Sequence[str], timeout_s: float
) -> AsyncIterator[Forker | None]:
    """The template process, which imports the modules ``preload`` names, while the block
    runs; None when ``enabled`` is false or forking cannot work here (then peers are exec'd).
    A request it does not answer within ``timeout_s`` (its imports included, for the first)
    ends it: peers are exec'd from then on.
    """
    forker = await _start(stdout, preload, timeout_s) if enabled else None
    try:
        yield forker
    finally:
        if forker is not None:
            with trio.CancelScope(shield=True):
                await forker.aclose()


async def _start(stdout: int, preload: Sequence[str], timeout_s: float) -> Forker | None:
    if not supported():
        return None
    try:
        _subreaper(False)  # prctl works here (a seccomp profile may refuse it)
    except OSError as exc:
        log.info("peers are not forked from a template: %s", exc)
        return None
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        process = await trio.lowlevel.open_process(
            [
                sys.executable,
                "-P",
                "-m",
                FORKER_MODULE,
                "--socket-fd",
                str(theirs.fileno()),
                "--preload",
                ",".join(preload),
            ],
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            pass_fds=(theirs.fileno(),),
            start_new_session=True,
        )
    except OSError as exc:
        ours.close()
        log.warning("peers are not forked from a template: %s", exc)
        return None
    finally:
        theirs.close()
    return Forker(process, trio.socket.from_stdlib_socket(ours), timeout_s)


# -- the template ---------------------------------------------------------------------------


def _preload(modules: Sequence[str]) -> None:
    """Import what a peer imports (named by the launcher: this module imports no satind)."""
    import setproctitle  # noqa: F401  (for the forked peers' titles)

    for name in modules:
        importlib.import_module(name)


def _serve(sock: socket.socket) -> None:
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 2)
        except OSError:
            return
        if not msg:
            return  # the launcher is gone
        try:
            request = json.loads(msg)
            argv = [str(a) for a in request["argv"]]
            pid = _fork_peer(sock, argv, [int(f) for f in request["fds"]], fds)
            answer: dict[str, object] = {"pid": pid}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            answer = {"error": str(exc)}
        finally:
            for fd in fds:
                os.close(fd)
        sock.send(json.dumps(answer).encode())


def _fork_peer(sock: socket.socket, argv: list[str], named: list[int], fds: list[int]) -> int:
    """Fork the middle process, which forks the peer and exits; the peer's pid."""
    if len(fds) != len(named):
        raise ValueError(f"{len(named)} descriptors named, {len(fds)} passed")
    # The descriptors as the launcher named them in the command line: they are numbered
    # otherwise here.
    renumber = dict(zip([str(n) for n in named], [str(f) for f in fds], strict=True))
    argv = [
        renumber.get(a, a) if i and argv[i - 1].endswith("-fd") else a for i, a in enumerate(argv)
    ]
    read, write = os.pipe()
    middle = os.fork()
    if middle == 0:
        code = 0
        try:
            os.close(read)
            peer = os.fork()
            if peer == 0:
                os.close(write)
                _become_peer(sock, argv)
            os.write(write, str(peer).encode())
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as said:
        text = said.read()
    _, status = os.waitpid(middle, 0)
    if not text or os.waitstatus_to_exitcode(status) != 0:
        raise OSError("the peer could not be forked")
    return int(text)


def _become_peer(sock: socket.socket, argv: list[str]) -> None:
    """In the forked peer: run as ``argv`` says, then exit (never returns)."""
    code: object = 1
    try:
        sock.close()
        os.setsid()
        # One string with the arguments separated by spaces (what `ps` shows): readers of
        # /proc/PID/cmdline split at spaces as well as NULs.
        import setproctitle

        setproctitle.setproctitle(subprocess.list2cmdline(argv))
        # What `python -m MODULE ARGS` does, in this interpreter: the module's imports are
        # done already.
        module = argv.index("-m") + 1
        sys.argv = [argv[module], *argv[module + 1 :]]
        # Run as `python -m` runs it: as __main__, not also under its own name (runpy warns
        # of a module run that is imported already, on every peer's stderr).
        sys.modules.pop(argv[module], None)
        runpy.run_module(argv[module], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code
        if isinstance(code, str):  # as the interpreter does with sys.exit("message")
            print(code, file=sys.stderr)
    except BaseException:
        logging.getLogger(FORKER_MODULE).exception("forked peer failed")
    finally:
        # What an interpreter's exit does: the exit handlers (logging's flush among them),
        # then the streams.
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code if isinstance(code, int) else 0 if code is None else 1)


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 4 or args[0] != "--socket-fd" or args[2] != "--preload":
        sys.exit(
            "usage: python -m satind.ops.forker --socket-fd FD --preload MODULE,... "
            "(started by a launcher)"
        )
    sock = socket.socket(fileno=int(args[1]))
    os.set_inheritable(sock.fileno(), False)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the launcher stops it, by its socket
    _preload(args[3].split(","))
    _serve(sock)


if __name__ == "__main__":
    main()
