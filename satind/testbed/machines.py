"""The testbed's machines: a real `satind start` daemon in each network namespace, with the
shipped defaults, and the faults a machine meets, each one call.

Every machine listens on ``0.0.0.0:7420`` (peer i on 7420 + i), the same port everywhere as in
production, and keeps its state in a directory of its own (``XDG_STATE_HOME`` points there:
the run history and whatever else a daemon keeps across restarts; checkpoints too when asked).
Machines are set up as README.md says: the first without seeds, every other seeded with the
first's address. Keys: one cluster CA, a node certificate per machine and the operator client
``client``, made in the testbed's directory.

Processes are found by the namespace they live in (``network.pids_in``), never by name: crashing
a machine SIGKILLs every process in its namespace — the daemon, its peers and anything a plugin
forked — as pulling its power would.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import satind.testbed.views as views_of
from satind.testbed.network import Network, pids_in
from satind.testbed.views import View

PORT = 7420
# seconds. How long a machine's daemon may take to say its peers' addresses.
START_TIMEOUT_S = 60.0
# seconds. How long the processes of a crashed or stopped machine may take to be gone.
GONE_TIMEOUT_S = 30.0
ENTER = Path(__file__).with_name("enter.py")
STATE_FILE = "testbed.json"


@dataclass
class Machine:
    """One machine: its namespace, address, state directory and daemon."""

    name: str
    netns: str
    ip: str
    home: Path
    peers: int
    cluster: str
    seeds: list[str]
    extra: list[str] = field(default_factory=list)
    daemon: subprocess.Popen[bytes] | None = None
    # Where this start's lines begin in daemon.log (a restart appends).
    log_offset: int = 0
    starts: int = 0

    @property
    def address(self) -> str:
        """Its first peer's address, as clients and seeds name it."""
        return f"{self.ip}:{PORT}"

    def addresses(self) -> list[str]:
        return [f"{self.ip}:{PORT + i}" for i in range(self.peers)]

    @property
    def log(self) -> Path:
        return self.home / "daemon.log"

    def log_text(self, since_start: bool = True) -> str:
        try:
            data = self.log.read_bytes()
        except OSError:
            return ""
        return data[self.log_offset if since_start else 0 :].decode("utf-8", "replace")

    def pids(self) -> list[int]:
        """Every process in the machine now, by id."""
        return pids_in(self.netns)

    def peer_pids(self) -> dict[str, int]:
        """Slot (``m1/0``) -> pid of the peer processes in the machine now."""
        found = {}
        for pid in self.pids():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").split()
            except OSError:
                continue
            if b"satind.ops.child" in argv and b"--name" in argv[:-1]:
                found[argv[argv.index(b"--name") + 1].decode()] = pid
        return found


class Testbed:
    """A network of machines, each a namespace running a daemon. ``Testbed.up`` makes one;
    ``down`` removes it (every process, namespace and link it made)."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, network: Network, root: Path, machines: list[Machine], keys: Path) -> None:
        self.network = network
        self.root = root
        self.machines = {m.name: m for m in machines}
        self.keys = keys

    # -- making and removing ----------------------------------------------------------------

    @classmethod
    def up(
        cls,
        count: int,
        root: Path,
        *,
        peers: int = 2,
        clusters: int = 1,
        seeds: str = "first",
        extra: Sequence[str] = (),
        checkpoints: bool = False,
        start: bool = True,
    ) -> Testbed:
        """Make ``count`` machines m1..mN in ``root`` and start their daemons (unless not
        ``start``): ``peers`` peers each, machine i in cluster ``c{i % clusters}``, seeded with
        the first machine (``seeds="first"``, README.md's set-up) or with every other machine
        (``"all"``). ``extra`` goes to every `satind start`.

        Raises:
            TestbedUnavailable: the network cannot be made here (says why).
        """
        if seeds not in ("first", "all"):
            raise ValueError("seeds is 'first' or 'all'")
        names = [f"m{i}" for i in range(1, count + 1)]
        root.mkdir(parents=True, exist_ok=True)
        keys = root / "keys"
        _make_keys(keys, names)
        network = Network.create(names)
        machines = []
        for i, name in enumerate(names):
            home = root / name
            (home / "state").mkdir(parents=True, exist_ok=True)
            others = [n for n in names if n != name]
            chosen = names[:1] if seeds == "first" else others
            machine_seeds = [] if name == names[0] and seeds == "first" else chosen
            machines.append(
                Machine(
                    name=name,
                    netns=network.netns(name),
                    ip=network.ip(name),
                    home=home,
                    peers=peers,
                    cluster=f"c{i % clusters}",
                    seeds=[f"{network.ip(s)}:{PORT}" for s in machine_seeds if s != name],
                    extra=list(extra)
                    + (["--checkpoint-dir", str(home / "checkpoints")] if checkpoints else []),
                )
            )
        bed = cls(network, root, machines, keys)
        bed.save()
        if start:
            try:
                # The first machine first, as README.md starts them: the others' seed is up
                # when they dial it.
                bed.start(machines[0].name)
                for machine in machines[1:]:
                    bed.start(machine.name, wait=False)
                for machine in machines[1:]:
                    bed.wait_started(machine.name)
            except BaseException:
                bed.down()
                raise
            bed.save()  # with each machine's start count, for a later `start` from the CLI
        return bed

    def down(self) -> None:
        """SIGKILL every process of every machine, by id, and remove the network."""
        for machine in self.machines.values():
            self._kill_all(machine)
        self.network.destroy()
        with contextlib.suppress(OSError):
            (self.root / STATE_FILE).unlink()

    def save(self) -> None:
        """Write what ``load`` needs to find this testbed again (the CLI's ``down``)."""
        state = {
            "network": self.network.as_json(),
            "keys": str(self.keys),
            "machines": [
                {k: v for k, v in vars(m).items() if k not in ("daemon", "home")}
                | {"home": str(m.home)}
                for m in self.machines.values()
            ],
        }
        (self.root / STATE_FILE).write_text(json.dumps(state, indent=1))

    @classmethod
    def load(cls, root: Path) -> Testbed:
        """The testbed ``up`` made in ``root`` (from another process).

        Raises:
            FileNotFoundError: no testbed there.
        """
        state = json.loads((root / STATE_FILE).read_text())
        network = Network.from_json(state["network"])
        machines = [Machine(**(dict(m) | {"home": Path(m["home"])})) for m in state["machines"]]
        return cls(network, root, machines, Path(state["keys"]))

    # -- daemons ----------------------------------------------------------------------------

    def command(self, machine: Machine) -> list[str]:
        """The `satind start` a machine runs, as README.md gives it."""
        cmd = [
            sys.executable,
            "-m",
            "satind",
            "start",
            "--keys",
            str(self.keys),
            "--name",
            machine.name,
            "--cluster",
            machine.cluster,
            "--listen",
            f"0.0.0.0:{PORT}",
            "--peers",
            str(machine.peers),
        ]
        if machine.seeds:
            cmd += ["--seeds", ",".join(machine.seeds)]
        return cmd + machine.extra

    def start(self, name: str, wait: bool = True) -> None:
        """Start a machine's daemon (a restart when it ran before: same name, same address,
        same state directory)."""
        machine = self.machines[name]
        if machine.daemon is not None and machine.daemon.poll() is None:
            raise RuntimeError(f"{name} runs already")
        left = machine.pids()
        if left:
            raise RuntimeError(f"{name} still has processes {left}: crash it first")
        env = dict(os.environ, XDG_STATE_HOME=str(machine.home / "state"), PYTHONUNBUFFERED="1")
        machine.log_offset = machine.log.stat().st_size if machine.log.exists() else 0
        with machine.log.open("ab") as log:
            log.write(f"-- testbed: start {machine.starts + 1} of {name}\n".encode())
            machine.log_offset = log.tell()
            machine.daemon = subprocess.Popen(
                [sys.executable, str(ENTER), machine.netns, "--", *self.command(machine)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                cwd=machine.home,
                start_new_session=True,  # Ctrl-C at the test's terminal is not the machine's
            )
        machine.starts += 1
        if wait:
            self.wait_started(name)

    def wait_started(self, name: str, timeout: float = START_TIMEOUT_S) -> dict[str, str]:
        """Wait until the machine's daemon said its peers' addresses; returns slot -> address.

        Raises:
            AssertionError: it exited or did not say so in time (with its log).
        """
        machine = self.machines[name]
        deadline = time.monotonic() + timeout
        pattern = re.compile(rf"satind {re.escape(name)} \(cluster [^)]*\): (.*)")
        while time.monotonic() < deadline:
            found = pattern.search(machine.log_text())
            if found:
                return dict(part.split("=", 1) for part in found.group(1).split(", "))
            if machine.daemon is not None and machine.daemon.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"{name}'s daemon did not start:\n{machine.log_text()[-4000:]}")

    # -- faults -----------------------------------------------------------------------------

    def crash(self, name: str) -> None:
        """SIGKILL every process in the machine (a power cut); returns once they are gone."""
        self._kill_all(self.machines[name])

    def restart(self, name: str, how: str = "crash", wait: bool = True) -> None:
        """Crash (``how="crash"``) or stop (``"stop"``: `satind stop` to it, gracefully)
        the machine, then start it again."""
        if how == "crash":
            self.crash(name)
        elif how == "stop":
            self.stop(name)
        else:
            raise ValueError("how is 'crash' or 'stop'")
        self.start(name, wait=wait)

    def stop(self, name: str, drain: bool = False, deadline_s: float | None = None) -> None:
        """`satind stop` (``--drain``, ``--deadline``) to the machine, as an operator stops it;
        returns once its daemon has exited."""
        machine = self.machines[name]
        args = ["stop", *(["--drain"] if drain else [])]
        if deadline_s is not None:
            args += ["--deadline", f"{deadline_s:g}"]
        done = self.satind(*args, to=name)
        if done.returncode != 0:
            raise AssertionError(f"`satind stop` to {name}: {done.stderr or done.stdout}")
        limit = (
            GONE_TIMEOUT_S + (deadline_s or 0.0) + (600.0 if drain and deadline_s is None else 0)
        )
        self._wait_gone(machine, limit)

    def terminate(self, name: str) -> None:
        """SIGTERM the machine's daemon (a service manager's stop); returns once it exited."""
        machine = self.machines[name]
        if machine.daemon is not None and machine.daemon.poll() is None:
            machine.daemon.send_signal(signal.SIGTERM)
        self._wait_gone(machine, GONE_TIMEOUT_S + 600.0)

    def pause(self, name: str) -> None:
        """SIGSTOP every process in the machine (a paused VM)."""
        for pid in self.machines[name].pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def resume(self, name: str) -> None:
        """SIGCONT every process in the machine."""
        for pid in self.machines[name].pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def kill_peer(self, slot: str) -> int:
        """SIGKILL one peer process (``m2/1``), which its daemon restarts; returns its pid.

        Raises:
            LookupError: no such peer runs now.
        """
        machine = self.machines[slot.split("/")[0]]
        pid = machine.peer_pids().get(slot)
        if pid is None:
            raise LookupError(f"no peer process runs in slot {slot}")
        os.kill(pid, signal.SIGKILL)
        return pid

    def cut(self, a: Iterable[str], b: Iterable[str], *, both: bool = True) -> None:
        self.network.cut(a, b, both=both)

    def heal(self, a: Iterable[str] | None = None, b: Iterable[str] | None = None) -> None:
        self.network.heal(a, b)

    def throttle(
        self, a: Iterable[str], b: Iterable[str], rate_bps: int, *, both: bool = True
    ) -> None:
        self.network.throttle(a, b, rate_bps, both=both)

    def _kill_all(self, machine: Machine) -> None:
        for _ in range(20):  # a process forked meanwhile is found by the next round
            pids = machine.pids()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        self._wait_gone(machine, GONE_TIMEOUT_S)

    def _wait_gone(self, machine: Machine, limit: float) -> None:
        deadline = time.monotonic() + limit
        if machine.daemon is not None:
            try:
                machine.daemon.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                raise AssertionError(
                    f"{machine.name}'s daemon did not exit in {limit:g} s"
                ) from None
        while time.monotonic() < deadline:
            if not [p for p in machine.pids() if not _zombie(p)]:
                return
            time.sleep(0.05)
        raise AssertionError(f"{machine.name} still has processes {machine.pids()}")

    # -- reaching the machines --------------------------------------------------------------

    def satind(
        self, *args: str, to: str = "m1", timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """A `satind` client command run on the host against machine ``to``."""
        return subprocess.run(
            [sys.executable, "-m", "satind", *args, *self.client_args(to)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def client_args(self, to: str) -> list[str]:
        return ["--to", self.machines[to].address, "--keys", str(self.keys)]

    def views(self, timeout: float = 5.0) -> dict[str, View]:
        """Each running peer's view of the members (``m1/0`` -> its view); a peer that does
        not answer within ``timeout`` is left out."""
        peers = [
            (f"{m.name}/{i}", address)
            for m in self.machines.values()
            if m.pids()
            for i, address in enumerate(m.addresses())
        ]
        return views_of.gather(peers, self.keys, timeout)

    def slots(self, machines: Iterable[str] | None = None) -> list[str]:
        names = list(machines) if machines is not None else list(self.machines)
        return [f"{n}/{i}" for n in names for i in range(self.machines[n].peers)]

    def one_system(self, machines: Iterable[str] | None = None) -> bool:
        """Whether every peer of ``machines`` (default: all) sees every one of them alive
        now."""
        return views_of.one_system(self.views(), self.slots(machines))

    def wait_one_system(self, timeout: float, machines: Iterable[str] | None = None) -> float:
        """Wait until every peer of ``machines`` (default: all) sees every one of them alive
        (the process now in each slot); returns the seconds it took.

        Raises:
            AssertionError: not within ``timeout``, with who sees whom.
        """
        slots = self.slots(machines)
        began = time.monotonic()
        seen: dict[str, View] = {}
        while time.monotonic() - began < timeout:
            seen = self.views(timeout=min(5.0, max(0.5, timeout - (time.monotonic() - began))))
            if views_of.one_system(seen, slots):
                return time.monotonic() - began
            time.sleep(0.25)
        raise AssertionError(f"not one system within {timeout:g} s:\n{views_of.split(seen)}")

    def describe(self) -> str:
        """How to reach each machine (what `python -m satind.testbed up` prints)."""
        lines = [
            f"testbed {self.network.index} in {self.root} (bridge {self.network.bridge}, "
            f"this host at {self.network.host_ip})"
        ]
        for m in self.machines.values():
            lines.append(
                f"  {m.name}: {m.ip}, peers {m.address}..{PORT + m.peers - 1}, cluster "
                f"{m.cluster}, namespace {m.netns}, log {m.log}"
            )
        first = next(iter(self.machines.values()))
        lines += [
            "reach it from this host:",
            f"  satind status --to {first.address} --keys {self.keys}",
            f"  satind submit nqueens 12 --wait --to {first.address} --keys {self.keys}",
            "or from inside a machine:",
            f"  ip netns exec {first.netns} satind status --to 127.0.0.1:{PORT} --keys {self.keys}",
            f"remove it: python -m satind.testbed down --dir {self.root}",
        ]
        return "\n".join(lines)


def _make_keys(keys: Path, machines: Sequence[str]) -> None:
    from satind.net import tls

    if (keys / "ca.pem").exists():
        return
    tls.init_ca(keys)
    tls.issue(keys, "client", client=True, grants=tls.GRANTS)
    for name in machines:
        tls.issue(keys, name)


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


def status_of(bed: Testbed) -> dict[str, Any]:
    """The machines' processes (for the CLI's ``status``)."""
    return {
        name: {"ip": m.ip, "pids": m.pids(), "peers": m.peer_pids()}
        for name, m in bed.machines.items()
    }
