"""``python satind/testbed/enter.py NETNS -- COMMAND ...``: run COMMAND inside the named
network namespace (a testbed machine's), as ``ip netns exec`` does, without needing iproute2.

It joins the namespace (``setns``) and then replaces itself with COMMAND (``execvp``): the
process the testbed started *is* the command, with its pid, so crashing a machine kills it by
id like any other process there. Why a process of its own rather than a ``preexec_fn``: the
join happens before ``exec`` in a single-threaded process, not in a fork of a threaded one.
It is run as a script, by its path, and imports nothing of satind: ``import satind`` costs
more than half a second, paid at every machine start.
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWNET = 0x40000000


def enter(netns_name: str) -> None:
    """Move this process into the namespace ``/run/netns/NETNS``.

    Raises:
        OSError: no such namespace, or not allowed (not root).
    """
    fd = os.open(f"/run/netns/{netns_name}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        setns = getattr(os, "setns", None)  # Python 3.12+
        if setns is not None:
            setns(fd, CLONE_NEWNET)
        else:  # glibc's setns(2) wrapper: this script must start fast (no pyroute2 import)
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(fd, CLONE_NEWNET) != 0:
                code = ctypes.get_errno()
                raise OSError(code, os.strerror(code))
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: enter.py NETNS -- COMMAND [ARG ...]", file=sys.stderr)
        return 2
    try:
        enter(argv[0])
    except OSError as exc:
        print(f"cannot enter network namespace {argv[0]}: {exc}", file=sys.stderr)
        return 1
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
