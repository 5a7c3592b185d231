"""Finding the processes a benchmark started, by id (never by name)."""

from __future__ import annotations

from pathlib import Path


def peer_pid(daemon_pid: int, peer: str) -> int:
    """The pid of the child of ``daemon_pid`` that runs peer ``peer`` (e.g. "m1/0").

    Raises:
        LookupError: no such child.
    """
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        if parent == daemon_pid and peer.encode() in cmd:
            return int(entry.name)
    raise LookupError(f"no process for peer {peer} under {daemon_pid}")
