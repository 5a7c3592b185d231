"""The vetting process: ``python -m satind.ops.vetter --report-fd FD --lifeline-fd L UNITS``
imports each plugin module of UNITS (a JSON list of ``[kind, target]``: satind/vetting.py)
in order and reports on FD — a pipe of its own, not stdout, which plugin code writes to — one
JSON line when it starts a module and one when it is done with it (``error``: "" or what went
wrong). An exception or ``sys.exit`` at import is caught and reported; ``os._exit``, a crash
or a loop end or stall this process, and its parent blames the module it was importing. It
exits at once when the pipe L reaches end of file: its parent is gone.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import resource
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from satind.plugin import describe_failure, load_entry_point, load_path_module
from satind.plugin.importing import shipped_package


def vet_units(units: Sequence[tuple[str, str]], report: IO[str], memory_mb: int = 0) -> None:
    for index, (kind, target) in enumerate(units):
        _flush()  # what the last module wrote goes before this line (vetting.py reads so)
        _say(report, {"unit": index})
        try:
            if kind == "file":
                load_path_module(Path(target))
            elif kind == "shipped":
                # A shipped version's file, in the directory named by its hash (shipped.py).
                load_path_module(Path(target), shipped_package(Path(target).parent.name))
            else:
                load_entry_point(target)
            error = ""
        except BaseException as exc:  # sys.exit, KeyboardInterrupt too: the module's doing
            error = describe_failure(exc)
            if memory_mb and _out_of_memory(exc):
                error += (
                    f" (its import took more than the {memory_mb} MiB of address space a "
                    "vetting process may take: [plugins] vet_memory_mb)"
                )
        _flush()
        _say(report, {"unit": index, "error": error})


def _out_of_memory(exc: BaseException) -> bool:
    """Whether an import failed for want of address space: a MemoryError, a native library
    that could not be mapped, a thread that could not start."""
    text = str(exc)
    return (
        isinstance(exc, MemoryError)
        or (isinstance(exc, OSError) and exc.errno == errno.ENOMEM)
        or "failed to map segment" in text
        or "can't start new thread" in text
        or "Cannot allocate memory" in text
    )


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _say(report: IO[str], obj: object) -> None:
    report.write(json.dumps(obj) + "\n")
    report.flush()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m satind.ops.vetter")
    parser.add_argument("--report-fd", type=int, required=True)
    parser.add_argument("--lifeline-fd", type=int, required=True)
    parser.add_argument("--memory-mb", type=int, default=0)
    parser.add_argument("units")
    args = parser.parse_args(argv)
    # Not handed on to processes the plugins start: the parent sees the pipe's end of file
    # when this process ends.
    os.set_inheritable(args.report_fd, False)
    os.set_inheritable(args.lifeline_fd, False)
    # A thread gets its turn even while a plugin loops in Python (the GIL is handed over
    # every few milliseconds).
    threading.Thread(target=_exit_with_parent, args=(args.lifeline_fd,), daemon=True).start()
    if args.memory_mb > 0:  # after the thread, whose stack is mapped already
        # The soft limit only, and never above the hard one (a process may not raise that:
        # under `ulimit -v` or systemd's LimitAS= setting both failed every vetting).
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = args.memory_mb * 2**20
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        if soft == resource.RLIM_INFINITY or limit < soft:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    with os.fdopen(args.report_fd, "w") as report:
        units = [(str(k), str(t)) for k, t in json.loads(args.units)]
        vet_units(units, report, args.memory_mb)
    # Not a normal exit: threads a plugin started and its atexit handlers are not waited for.
    _flush()
    os._exit(0)


def _exit_with_parent(lifeline: int) -> None:
    with contextlib.suppress(OSError):
        while os.read(lifeline, 1):
            pass
    os._exit(1)


if __name__ == "__main__":
    main()
