"""Election: a run whose master is lost gets a new one (satin-fault-tolerance §3.4).

The rule is deterministic over the membership view: the alive member with the smallest name
takes over every run whose master is no longer alive, under the next **epoch**, and respawns
the root. Views converge, so the members agree; if they differ for a moment and two take
over, the higher epoch — then the smaller master name — wins (``runs.supersedes``), and the
loser follows the winner. The run's arguments travel with its descriptor, so any peer that
knows the run can respawn it; the same run state goes on, so whatever the old epoch finished
— here, or kept as orphans anywhere — is reused by the new one (orphans.py).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from satind.core.effects import Effects
from satind.core.runs import PeerRun
from satind.net.codec import Encoded

if TYPE_CHECKING:
    from satind.core.state import PeerState

log = logging.getLogger(__name__)


def elect(state: PeerState, now: float) -> Effects:
    """Take over the runs whose master is gone, if this peer is the one to."""
    alive = {mem.name for mem in state.table.alive()}
    if not alive or min(alive) != state.name:
        return []
    fx: Effects = []
    for run in state.runs.orphaned(alive):
        fx += take_over(state, run, now)
    return fx


def take_over(state: PeerState, run: PeerRun, now: float) -> Effects:
    """Become the run's master under the next epoch and respawn its root."""
    from satind.core.master import start

    if run.plugin is None or run.refused is not None:
        log.error(
            "run %s lost its master but this peer cannot run it: %s", run.info.run_id, run.refused
        )
        return []
    info = dataclasses.replace(run.info, master=state.name, epoch=run.info.epoch + 1)
    log.warning(
        "run %s lost its master %s: taking over as epoch %d",
        info.run_id,
        run.info.master,
        info.epoch,
    )
    run.info = info
    run.args = Encoded(info.args)  # decoded by the compute side, not here
    run.submitter = None
    return start(state, run, now)
