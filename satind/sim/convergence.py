"""Membership convergence and idleness: when every live peer first sees exactly the live
peers, and how many steal attempts the peers make (the report counts those made after the
run ended: a system whose run ended must go quiet)."""

from __future__ import annotations

import trio

from satind.membership.swim import suspicion_timeout
from satind.sim.state import SimState


class ConvergenceWatch(SimState):
    """Watches membership agreement and counts steal attempts."""

    async def _watch_convergence(self) -> None:
        """The first time every live peer sees exactly the live peers."""
        while True:
            await trio.sleep(0.25)
            if self._agreed():
                self.converged_at = trio.current_time()
                if self.scenario.workload is None and not self.runs and self.plugin is None:
                    self._done.set()
                return

    def steal_attempts(self) -> int:
        return sum(
            p.state.steal.steal_attempts_local + p.state.steal.steal_attempts_wide
            for p in self.peers.values()
        )

    def _agreed(self) -> bool:
        live = self.live()
        count = len(live)
        for name in live:
            if self.peers[name].table.alive_count != count:
                return False
        expected_set = sorted(live)
        return all([mem.name for mem in self.peers[n].table.alive()] == expected_set for n in live)

    def _settle_s(self) -> float:
        """How long membership must go unchanged, after the runs and the faults are over,
        before its agreement is judged."""
        sc = self.scenario
        # Let membership settle after the last change before judging agreement: long
        # enough to detect a crash (a few probes plus the longest suspicion).
        n = max(2, len(self.live()))
        # Without membership faults, a few probe rounds let the end of the run spread.
        settle = self.cfg.membership.probe_interval_s * (
            8
            + self.cfg.membership.suspicion_max_mult
            * suspicion_timeout(self.cfg.membership.suspicion_mult, n, 1.0)
            if sc.faults
            else 5
        )
        if sc.faults and (sc.drop > 0 or any(f.kind == "drop" for f in sc.faults)):
            # Under loss a live member can be declared dead and its refutation lost
            # on the way to some peers; what heals that is the anti-entropy of the
            # periodic push-pull, so agreement is judged after two such periods: one
            # is not enough in the tail (each peer pulls from one random member per
            # period, and a tenth of the messages are lost; seed 19 of
            # needle-crash-loss, after a change of schedule, had a peer still holding
            # a refuted death 43 s later).
            settle += 2 * self.cfg.membership.push_pull_interval_s
        return settle
