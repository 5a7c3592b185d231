"""The chaos soak's machines on loopback (benchmarks/soak.py without ``--testbed``): two or three
`satind start` daemons of two peers on fixed loopback ports with the shipped defaults
(tests/integration/crashes.machines()), and the killer's faults there: SIGKILL of a peer, of a
run's master, or of a whole machine (its daemon and peers), started again on the same ports."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.integration.crashes import CLUSTERS, machines
from tests.integration.test_daemon import Daemon

if TYPE_CHECKING:
    from soak import Kill, Soak

# What the killer does, by probability: a whole machine (every peer of a daemon at once, and
# the daemon), the master of a running run (the hardest case for recovery), else any peer.
FAULTS = (("machine", 0.15), ("master", 0.35), ("peer", 0.50))
# seconds. A restarted machine is down this long (its peers are declared dead meanwhile).
MACHINE_DOWN_S = 3.0


@contextmanager
def loopback(keys: Path, count: int) -> Iterator[Loopback]:
    """``count`` daemons with their keys and logs in ``keys``, stopped at the end."""
    keys.mkdir()
    with machines(keys, count) as daemons:
        yield Loopback(keys, daemons)


class Loopback:
    """Two or three daemons on loopback ports (tests/integration/crashes.machines()), keys and
    logs in ``keys``."""

    faults = FAULTS

    def __init__(self, keys: Path, daemons: list[Daemon]) -> None:
        self.keys = keys
        self.daemons = daemons  # replaced in place when a machine restarts
        self.clusters = dict(zip((d.name for d in daemons), CLUSTERS, strict=False))
        self.restarts: Counter[str] = Counter()

    def pick(self, rng: random.Random) -> tuple[str, str]:
        daemon = rng.choice(self.daemons)
        slot = rng.choice(sorted(daemon.addresses))
        return slot, daemon.addresses[slot]

    def firsts(self) -> list[str]:
        return [d.first for d in self.daemons]

    def peers(self, machine: str) -> dict[str, int]:
        return next(d for d in self.daemons if d.name == machine).peers()

    def processes(self) -> list[tuple[str, int]]:
        return [
            (slot, pid)
            for daemon in list(self.daemons)
            for slot, pid in {daemon.name: daemon.proc.pid, **daemon.peers()}.items()
        ]

    def logs(self) -> list[tuple[str, Path]]:
        return [(log.name, log) for log in sorted(self.keys.glob("*.log*"))]

    def config(self) -> dict[str, Any]:
        return {"mode": "loopback", "daemons": len(self.daemons), "peers_per_machine": 2}

    def inflict(self, soak: Soak, action: str, rng: random.Random) -> Kill:
        if action == "machine":
            return self.restart_machine(soak, rng.choice(range(len(self.daemons))))
        if action == "master":
            return soak.kill_master(rng)
        return soak.kill_peer(self.pick(rng)[0], "peer")

    def at_end(self, soak: Soak) -> dict[str, Any] | None:
        return None

    def restart_machine(self, soak: Soak, index: int) -> Kill:
        """SIGKILL a daemon and its peers (by pid), then start it again on the same ports,
        joining through the other machines."""
        old = self.daemons[index]
        peers = old.peers()
        kill = soak.record("machine", sorted(peers), [old.proc.pid, *peers.values()])
        old.kill()
        # Its log goes on in a new file (Daemon opens NAME.log anew).
        self.restarts[old.name] += 1
        old.log.rename(old.log.with_name(f"{old.name}.log.{self.restarts[old.name]}"))
        seeds = ",".join(d.first for d in self.daemons if d is not old)
        for attempt in range(3):
            # Not while the soak stops: a daemon started now might miss the teardown.
            if soak.stopping.wait(MACHINE_DOWN_S * (attempt + 1)):
                kill.note = "the soak stopped before the machine was started again"
                return kill
            try:
                new = Daemon(self.keys, old.name, self.clusters[old.name], seeds, listen=old.first)
            except AssertionError as exc:  # it did not start (Daemon stopped it)
                kill.note += f"start {attempt + 1} failed: {str(exc)[-300:]}; "
                continue
            self.daemons[index] = new
            soak.undone(kill)
            return kill
        raise AssertionError(f"machine {old.name} did not start again: {kill.note}")
