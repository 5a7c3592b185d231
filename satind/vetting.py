"""Vetting plugin modules: import each one first in a short-lived process of its own.

A plugin module's top level is arbitrary code, and it runs in every process that loads the
plugin — a peer, a daemon's restart of one, the ``satind`` command itself. Whatever it does
there (print, ``sys.exit``, raise, ``os._exit``, loop forever) must cost that plugin only. An
exception can be caught in-process; ``os._exit``, a crash of the interpreter and an endless
loop cannot (Python cannot stop a thread). So before a process imports a plugin module it
has this module import it in a child process (``python -m satind.ops.vetter``) under a time
limit, ``plugins.import_timeout_s``, and imports only the modules that came through.

One vetting process imports every module given, in order, and says over a pipe of its own
(never its stdout, which plugin code writes to) when it starts and ends each one. When it
dies or overruns the limit, the module it was importing is blamed and a new process goes on
with the rest: a vetting costs one interpreter start when every module is well behaved, one
more per module that kills its process. Its stdout and stderr are read (so that a plugin that
writes megabytes cannot block it) and the last lines go into the message about a module that
failed.

Alternatives not taken: importing in-process under ``signal.alarm`` does not stop
``os._exit`` or a loop in C code, and works in the main thread only (a reload runs in a
worker thread); importing in a thread that is abandoned on timeout leaves the loop running in
the peer forever. What vetting cannot see: a module that behaves differently the second time
(on randomness, the time, a file it changes) is imported in-process anyway, where an exception
or ``sys.exit`` is still caught and costs that plugin only, but ``os._exit`` or a loop costs
the process (a daemon restarts a peer that died).
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

VETTER_MODULE = "satind.ops.vetter"
# bytes. What is kept of a vetting process's own output (the newest), for the message about
# a module that failed: enough for a traceback's last frames.
OUTPUT_TAIL_BYTES = 2000
# seconds. How often a vetting process that keeps its report pipe open past its death (a
# plugin that forked) is checked on.
POLL_S = 0.2


@dataclass(frozen=True)
class Unit:
    """One plugin module to vet: a file (``kind`` "file", ``target`` its absolute path), a
    shipped version's file ("shipped", in the directory named by its code hash), or an
    importable module (``kind`` "module", ``target`` ``pkg.mod`` or ``pkg.mod:attr``, as an
    entry point names it)."""

    kind: str
    target: str


def vet(
    units: Sequence[Unit], timeout_s: float, start_timeout_s: float, memory_mb: int = 0
) -> dict[Unit, str]:
    """Import each unit in a vetting process; what went wrong with each ("" for none).

    Each unit's import gets ``timeout_s``; a vetting process gets ``start_timeout_s`` to be
    ready for its first, and ``memory_mb`` MiB of address space (0: no bound).
    """
    verdicts: dict[Unit, str] = {}
    pending = list(units)
    while pending:
        done, blamed, why = _one_process(pending, timeout_s, start_timeout_s, memory_mb)
        verdicts.update(done)
        if blamed is None:  # the process failed before it imported anything
            for unit in pending:
                verdicts.setdefault(unit, why)
            break
        verdicts[blamed] = why
        pending = [u for u in pending if u not in verdicts]
    return verdicts


def _one_process(
    units: Sequence[Unit], timeout_s: float, start_timeout_s: float, memory_mb: int
) -> tuple[dict[Unit, str], Unit | None, str]:
    """Vet ``units`` in one process until it ends or fails: the verdicts it gave, and the unit
    it failed on with why (None: the process failed before it imported anything); (verdicts,
    None, "") when it vetted them all."""
    read_end, write_end = os.pipe()
    # Never written: the vetting process exits when it ends, so that it never outlives this
    # process (killed while a plugin loops there, say).
    lifeline, keep_alive = os.pipe()
    command = [
        sys.executable,
        "-P",  # as peers run: the current directory is not on sys.path
        "-m",
        VETTER_MODULE,
        "--report-fd",
        str(write_end),
        "--lifeline-fd",
        str(lifeline),
        "--memory-mb",
        str(memory_mb),
        json.dumps([[u.kind, u.target] for u in units]),
    ]
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(write_end, lifeline),
            # Ctrl-C at a terminal is for the process that vets, which then ends this one.
            start_new_session=True,
        )
    except OSError as exc:
        os.close(read_end)
        os.close(keep_alive)
        return {}, None, f"cannot start a process to import it in: {exc}"
    finally:
        os.close(write_end)
        os.close(lifeline)
    assert process.stdout is not None
    # Read without blocking: when a report comes, what the process wrote before it is taken
    # first (vetter.py flushes its output before each report), so that the output kept for
    # a module's message is its own.
    os.set_blocking(process.stdout.fileno(), False)
    verdicts: dict[Unit, str] = {}
    started = False  # the process said anything: it is past its own start
    current: Unit | None = None  # the unit it is importing
    deadline = time.monotonic() + start_timeout_s
    reports, tail = b"", b""

    def blamed() -> Unit | None:
        # The unit being imported; between two units (a thread of the last one?), the next.
        if current is not None or not started:
            return current
        return next(u for u in units if u not in verdicts)

    with selectors.DefaultSelector() as selector, os.fdopen(read_end, "rb", buffering=0) as pipe:
        selector.register(pipe, selectors.EVENT_READ)
        selector.register(process.stdout, selectors.EVENT_READ)
        try:
            # Bounded by the deadline, which only a report moves; the process's end is seen
            # as end of file on both pipes, or by polling when something it started holds
            # them open (or it closed them and goes on).
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return verdicts, blamed(), _late(started, timeout_s, start_timeout_s, tail)
                events = selector.select(min(left, POLL_S))
                if not events and process.poll() is not None:
                    break
                for key, _ in events:
                    if key.fileobj is process.stdout:
                        tail, more = _take_output(process.stdout.fileno(), tail)
                        if not more:
                            selector.unregister(key.fileobj)
                        continue
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fileobj)
                    else:
                        reports += chunk
                        *lines, reports = reports.split(b"\n")
                        for line in lines:
                            said = _parse(line, units)
                            if said is None:
                                return verdicts, blamed(), "wrote to satind's report pipe"
                            started = True
                            index, error = said
                            deadline = time.monotonic() + timeout_s
                            if error is None:
                                current = units[index]
                                tail, _ = _take_output(process.stdout.fileno(), tail)
                                tail = b""
                                continue
                            verdicts[units[index]] = error
                            current = None
                            if len(verdicts) == len(units):
                                return verdicts, None, ""
            code = process.wait()
            return verdicts, blamed(), _death(code, tail, started)
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
            process.stdout.close()
            os.close(keep_alive)


def _take_output(fd: int, tail: bytes) -> tuple[bytes, bool]:
    """Read what is there of a vetting process's output, keeping the newest bytes; False
    once it ended."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return tail, True
        if not chunk:
            return tail, False
        tail = (tail + chunk)[-OUTPUT_TAIL_BYTES:]


def _late(started: bool, timeout_s: float, start_timeout_s: float, tail: bytes) -> str:
    if not started:
        return (
            f"the process that vets plugins did not start within {start_timeout_s:g} s "
            f"(plugins.vetter_start_timeout_s){_said(tail)}"
        )
    return f"did not finish importing it within {timeout_s:g} s (plugins.import_timeout_s)" + (
        _said(tail)
    )


def _parse(line: bytes, units: Sequence[Unit]) -> tuple[int, str | None] | None:
    """A report line: (unit index, None) when it starts, (index, error or "") when it ended;
    None when the line is not one the vetter writes."""
    try:
        said = json.loads(line)
        index = said["unit"]
        error = said.get("error")
    except (ValueError, TypeError, KeyError):
        return None
    if not (isinstance(index, int) and 0 <= index < len(units)):
        return None
    if error is not None and not isinstance(error, str):
        return None
    return index, error


def _death(code: int, tail: bytes, started: bool) -> str:
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    if not started:
        return f"the process that vets plugins {how} before it imported anything{_said(tail)}"
    return f"its process {how} while importing it{_said(tail)}"


def _said(tail: bytes) -> str:
    """The end of what a vetting process wrote, for a message (its last non-empty line)."""
    lines = [line.strip() for line in tail.decode(errors="replace").splitlines() if line.strip()]
    return f"; it wrote: {lines[-1][:300]}" if lines else ""
