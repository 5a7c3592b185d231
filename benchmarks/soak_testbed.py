"""The chaos soak's machines on a testbed (benchmarks/soak.py ``--testbed``; satind/testbed/,
needs root): machines m1..mN, each a network namespace with its own address running `satind
start` with the shipped defaults on 0.0.0.0:7420, set up as README.md says (the first without
seeds, every other seeded with it), and the faults machines meet.

Each fault is undone before the killer draws the next one: a crashed machine is started
again MACHINE_DOWN_S later (as a service manager would), a stopped or drained one at once, a
partition healed and a paused machine resumed after their outage. Then the killer waits for
one system (every peer sees every other's current process alive) and records how long it
took; at the end of the soak, once every run answered, whether the machines are one system.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyroute2.config

from satind.testbed import PORT, Testbed, unavailable

if TYPE_CHECKING:
    from soak import Kill, Soak

# pyroute2 forks a child to open a netlink socket in a namespace (every cut and heal) and
# ends it with SIGTERM; the child inherits the soak's handler, which raises KeyboardInterrupt
# (soak.terminated_as_interrupt), and printed its traceback as "Exception in thread killer".
# With this the child resets SIGTERM to its default first.
pyroute2.config.disable_mp_signal = True

# What the killer does, by probability. SIGKILL of a peer (its daemon restarts it), of a
# running run's master, of every process of a machine (a power cut), of the machine of a
# running run's master; a clean `satind stop` then a start (an operator's restart); `satind
# stop --drain --deadline 5` then a start; a partition of a random split of the machines (a
# switch that fails); SIGSTOP of a machine (a paused VM). The master's faults weigh most:
# they are recovery's hardest cases.
FAULTS = (
    ("peer", 0.15),
    ("master", 0.20),
    ("machine", 0.10),
    ("master-machine", 0.15),
    ("restart", 0.10),
    ("drain", 0.10),
    ("partition", 0.10),
    ("pause", 0.10),
)
# seconds. A crashed machine is down this long before its daemon is started again: its peers
# are suspected meanwhile, and not yet dead (about 12 s with the shipped defaults).
MACHINE_DOWN_S = 3.0
# seconds. A drain's deadline (`satind stop --drain --deadline`).
DRAIN_DEADLINE_S = 5.0
# seconds, drawn uniformly. A partition from shorter than failure detection (nobody is found
# dead) to far longer (each side takes over the other's runs); a pause likewise.
PARTITION_S = (10.0, 60.0)
PAUSE_S = (10.0, 30.0)
# seconds. How long the killer waits for one system after a fault before it goes on (the
# report says which faults did not settle in time), and how long the soak's end waits.
SETTLE_LIMIT_S = 60.0
END_LIMIT_S = 120.0
# How often a machine's start is tried before the killer gives up on it (a start waits
# machines.START_TIMEOUT_S for the daemon's peers).
START_TRIES = 3


@contextmanager
def testbed(root: Path, count: int, peers: int) -> Iterator[TestbedMachines]:
    """``count`` machines of ``peers`` peers in ``root`` (keys, mN/daemon.log, mN/state),
    one system before it is yielded; every process, namespace and link removed at the end.

    Raises:
        SystemExit: no testbed can be made here (says why).
    """
    why = unavailable()
    if why:
        raise SystemExit(f"satind soak: no testbed here: {why}")
    bed = Testbed.up(count, root, peers=peers)
    try:
        bed.wait_one_system(END_LIMIT_S)
        yield TestbedMachines(bed)
    finally:
        bed.down()


class TestbedMachines:
    """soak.Machines on a testbed."""

    faults = FAULTS

    def __init__(self, bed: Testbed) -> None:
        self.bed = bed
        self.keys = bed.keys
        self.names = sorted(bed.machines, key=lambda name: int(name[1:]))

    def pick(self, rng: random.Random) -> tuple[str, str]:
        machine = self.bed.machines[rng.choice(self.names)]
        peer = rng.randrange(machine.peers)
        return f"{machine.name}/{peer}", f"{machine.ip}:{PORT + peer}"

    def firsts(self) -> list[str]:
        return [self.bed.machines[name].address for name in self.names]

    def peers(self, machine: str) -> dict[str, int]:
        return self.bed.machines[machine].peer_pids()

    def processes(self) -> list[tuple[str, int]]:
        """Every process of every machine: its peers by slot, its daemon by machine, anything
        else (a plugin's child) as mN/other."""
        found = []
        for name in self.names:
            machine = self.bed.machines[name]
            slots = {pid: slot for slot, pid in machine.peer_pids().items()}
            daemon = machine.daemon.pid if machine.daemon is not None else None
            for pid in machine.pids():
                found.append((slots.get(pid, name if pid == daemon else f"{name}/other"), pid))
        return found

    def logs(self) -> list[tuple[str, Path]]:
        return [(f"{name}/daemon.log", self.bed.machines[name].log) for name in self.names]

    def config(self) -> dict[str, Any]:
        first = self.bed.machines[self.names[0]]
        return {
            "mode": "testbed",
            "daemons": len(self.names),
            "peers_per_machine": first.peers,
            "root": str(self.bed.root),
            "machine_down_s": MACHINE_DOWN_S,
            "drain_deadline_s": DRAIN_DEADLINE_S,
            "partition_s": PARTITION_S,
            "pause_s": PAUSE_S,
            "settle_limit_s": SETTLE_LIMIT_S,
        }

    # -- faults -----------------------------------------------------------------------------

    def inflict(self, soak: Soak, action: str, rng: random.Random) -> Kill:
        if action == "peer":
            kill = soak.kill_peer(self.pick(rng)[0], "peer")
        elif action == "master":
            kill = soak.kill_master(rng)
        elif action in ("machine", "master-machine"):
            kill = self.crash(soak, action, rng)
        elif action in ("restart", "drain"):
            kill = self.stop(soak, action, rng.choice(self.names))
        elif action == "partition":
            kill = self.partition(soak, rng)
        elif action == "pause":
            kill = self.pause(soak, rng)
        else:
            raise ValueError(f"no fault {action!r} on a testbed")
        self.settle(soak, kill)
        return kill

    def crash(self, soak: Soak, action: str, rng: random.Random) -> Kill:
        """SIGKILL every process of a machine (``master-machine``: the machine of a running
        run's master; a random one when none runs), then start it again."""
        run_id, note = "", ""
        name = rng.choice(self.names)
        if action == "master-machine":
            found = soak.running_master(rng)
            if found:
                name, run_id = found[0].split("/")[0], found[1]
            else:
                note = "no run was running: a random machine"
        kill = self.begin(soak, action, name, run_id)
        kill.note = note
        try:
            self.bed.crash(name)
            soak.stopping.wait(MACHINE_DOWN_S)
        finally:
            self.start(soak, kill, name)
        return kill

    def stop(self, soak: Soak, action: str, name: str) -> Kill:
        """`satind stop` (``restart``) or `satind stop --drain --deadline 5` (``drain``) to a
        machine, then start it again."""
        kill = self.begin(soak, action, name)
        try:
            if action == "drain":
                self.bed.stop(name, drain=True, deadline_s=DRAIN_DEADLINE_S)
            else:
                self.bed.stop(name)
        finally:
            self.start(soak, kill, name)
        return kill

    def partition(self, soak: Soak, rng: random.Random) -> Kill:
        """Cut a random split of the machines in two (both ways), heal it after a while."""
        shuffled = rng.sample(self.names, len(self.names))
        cut = rng.randint(1, len(shuffled) - 1)
        side = sorted(shuffled[:cut], key=self.names.index)
        rest = sorted(shuffled[cut:], key=self.names.index)
        outage = self.outage(soak, rng, PARTITION_S)
        kill = soak.record("partition", self.bed.slots(side), [])
        kill.note = f"{','.join(side)} | {','.join(rest)} for {outage:.0f} s"
        self.bed.cut(side, rest)
        try:
            soak.stopping.wait(outage)
        finally:
            self.bed.heal()
            soak.undone(kill)
        return kill

    def pause(self, soak: Soak, rng: random.Random) -> Kill:
        """SIGSTOP every process of a machine, SIGCONT after a while."""
        name = rng.choice(self.names)
        outage = self.outage(soak, rng, PAUSE_S)
        kill = self.begin(soak, "pause", name)
        kill.note = f"for {outage:.0f} s"
        self.bed.pause(name)
        try:
            soak.stopping.wait(outage)
        finally:
            self.bed.resume(name)
            soak.undone(kill)
        return kill

    def begin(self, soak: Soak, action: str, name: str, run_id: str = "") -> Kill:
        machine = self.bed.machines[name]
        return soak.record(action, self.bed.slots([name]), machine.pids(), run_id)

    def start(self, soak: Soak, kill: Kill, name: str) -> None:
        """Start the machine again (whatever of it is left killed first), trying again when it
        does not start.

        Raises:
            AssertionError: it did not start in START_TRIES tries.
        """
        for attempt in range(START_TRIES):
            self.bed.crash(name)  # nothing left of it: `start` refuses a machine with processes
            try:
                self.bed.start(name)
            except (AssertionError, RuntimeError) as exc:
                kill.note += f" start {attempt + 1} failed: {str(exc)[-300:]};"
                soak.stopping.wait(MACHINE_DOWN_S * (attempt + 1))
                continue
            soak.undone(kill)
            return
        raise AssertionError(f"machine {name} did not start again:{kill.note}")

    def outage(self, soak: Soak, rng: random.Random, span: tuple[float, float]) -> float:
        """A partition's or a pause's length: drawn from ``span``, ending by the end of the
        submissions when the draw would outlast them (never shorter than ``span[0]``)."""
        drawn = rng.uniform(*span)
        return max(span[0], min(drawn, soak.until - time.monotonic()))

    # -- one system -------------------------------------------------------------------------

    def settle(self, soak: Soak, kill: Kill) -> None:
        """Wait until every peer sees every other alive (at most SETTLE_LIMIT_S), and record in
        ``kill`` how long after the fault was undone that was."""
        if kill.back_s is None:
            return
        undone = kill.t + kill.back_s
        deadline = time.monotonic() + SETTLE_LIMIT_S
        while time.monotonic() < deadline:
            if self.bed.one_system():
                kill.one_system_s = round(soak.now() - undone, 2)
                return
            if soak.stopping.wait(1.0):
                return

    def at_end(self, soak: Soak) -> dict[str, Any]:
        """Whether the machines are one system once every run answered, and how long after the
        last fault was undone they became one (from that fault's own wait when it saw it)."""
        began = soak.now()
        try:
            took: float | None = self.bed.wait_one_system(END_LIMIT_S)
            split = ""
        except AssertionError as exc:
            took, split = None, str(exc)
        last = soak.kills[-1] if soak.kills else None
        after: float | None = None
        if last is not None and last.one_system_s is not None:
            after = last.one_system_s
        elif last is not None and last.back_s is not None and took is not None:
            after = round(began + took - last.t - last.back_s, 2)
        return {
            "one_system": took is not None,
            "checked_at_s": round(began, 1),
            "waited_s": None if took is None else round(took, 2),
            "after_last_fault_s": after,
            "split": split,
        }
