"""Process helpers for end-to-end tests: find the processes a test started, by id."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import sys
from pathlib import Path


def children_of(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Field 4 is the parent pid; the command name (field 2) may contain spaces.
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            out.append(int(entry.name))
    return out


def peers_of(pid: int) -> list[int]:
    """The children of ``pid`` that are satind peers (not the template they are forked from:
    ops/forker.py), in the order of their pids."""
    return [child for child in children_of(pid) if peer_slot(child) is not None]


def peer_slot(pid: int) -> str | None:
    """The slot (``--name``, m1/0) of the satind peer process ``pid``; None when ``pid`` is
    gone or is not a peer."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").split()
    except OSError:
        return None
    if b"satind.ops.child" not in argv or b"--name" not in argv[:-1]:
        return None
    return argv[argv.index(b"--name") + 1].decode()


def rss_kb(pid: int) -> int | None:
    """The resident set size of ``pid`` in KiB (VmRSS); None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def free_ports(count: int, start: int = 21000, stop: int = 40000) -> int:
    """The first port of ``count`` consecutive free ones on 127.0.0.1 (a daemon's peers listen
    on port, port + 1, ...). Picked at random so that parallel test workers do not collide;
    a port taken between this check and its use fails that daemon's start, loudly."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(start, stop - count)
        socks: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise AssertionError(f"no {count} consecutive free ports in {start}..{stop}")


def ports_below_ephemeral(count: int) -> int:
    """The first of ``count`` consecutive free ports on 127.0.0.1 below the kernel's range for
    outgoing connections, whose ports could take one of them at any moment (for a test that
    needs a port to stay free, or to be held by no one but whom it chooses)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for port in range(low - 2000, low - count, count):
        try:
            for p in range(port, port + count):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    raise AssertionError(f"no {count} free ports below {low}")


def cpu_seconds(pid: int) -> float:
    """CPU seconds ``pid`` has used; infinite once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return float("inf")
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pin(pid: int, cpu: int) -> None:
    """Every thread of ``pid`` on one CPU. ``os.sched_setaffinity(pid)`` alone moves only the
    process's first thread: its compute thread, which exists already, would stay unpinned."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(tid), {cpu})


def renice_workers(pid: int, nice: int) -> None:
    """Every thread of ``pid`` but its first at priority ``nice``: its compute thread slows
    under load while its event loop (the first thread: gossip, steals, replies) does not, so
    that the member is slow, not suspected of having failed. Linux sets a nice value per thread.
    """
    for tid in os.listdir(f"/proc/{pid}/task"):
        if int(tid) != pid:
            # A thread that ended meanwhile; a lower value needs root, else it stays slow.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.setpriority(os.PRIO_PROCESS, int(tid), nice)


def renice_session(pid: int, nice: int) -> None:
    """The autogroup of ``pid``'s session at priority ``nice``. With the kernel's autogroups
    (``sched_autogroup_enabled``) a CPU is shared between sessions first and by nice value
    only within one: a thread's nice value alone does not lift it above another session's
    processes. Without autogroups (a cgroup, another kernel) there is no such file: nothing
    to do, the threads' nice values count."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/autogroup").write_text(f"{nice}\n")


def start_hogs(count: int, cpu: int | None = None) -> list[subprocess.Popen[bytes]]:
    """``count`` busy processes, on ``cpu`` when given, each in a session of its own as a
    user's programs (and each peer: ops/launcher.py) are: with autogroups, hogs of one session
    would take one share of the CPU between them, not one each. Stop them with stop_hogs."""
    hogs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            hogs.append(
                subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            )
            if cpu is not None:
                os.sched_setaffinity(hogs[-1].pid, {cpu})
    except BaseException:
        stop_hogs(hogs)
        raise
    return hogs


def stop_hogs(hogs: list[subprocess.Popen[bytes]]) -> None:
    for hog in hogs:
        hog.kill()
        hog.wait()


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
