"""Who holds a TCP port this machine's daemon wants back (ops/daemon.py says it when a
restarted peer cannot listen yet).

Linux only, from /proc: the listening sockets of ``/proc/net/tcp`` and ``tcp6`` on the port,
then the processes with one of those sockets among their open files. Best effort: a process
of another user (whose files this one may not read) is not found, and anywhere else the
answer is empty. It costs a pass over every process's file descriptors, so it is asked
once per failed restart, never in a loop of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

# /proc/net/tcp's state column for a listening socket (include/net/tcp_states.h).
_LISTEN = "0A"


def _listening_inodes(ports: set[int], proc: Path) -> set[str]:
    found = set()
    for table in ("net/tcp", "net/tcp6"):
        try:
            lines = (proc / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            try:
                port = int(fields[1].rsplit(":", 1)[1], 16)
            except (IndexError, ValueError):
                continue
            if port in ports:
                found.add(fields[9])
    return found


def holders(ports: Iterable[int], proc: Path = Path("/proc")) -> list[int]:
    """The pids of the processes that hold a listening socket on any of ``ports`` (0 is
    ignored), smallest first; [] when none is found or /proc cannot say."""
    wanted = {p for p in ports if p}
    inodes = _listening_inodes(wanted, proc) if wanted else set()
    if not inodes:
        return []
    links = {f"socket:[{inode}]" for inode in inodes}
    pids = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:
            continue  # gone, or another user's
        for fd in fds:
            try:
                if os.readlink(fd) in links:
                    pids.append(int(entry.name))
                    break
            except OSError:
                continue
    return sorted(pids)
