"""The compute side's reports (``work/reports.py``) for a peer: each goes to the trio thread
through the compute driver (``soon``), where the core decides (``core/handle.handle``) and the
node applies the effects.

``report`` is called on the compute side and must not block: the real driver hops to the trio
thread with ``TrioToken.run_sync_soon``, the simulator's runs it after the compute side's
turn. Only two reports are the node's own besides: the steal loop hears that the compute side
wants work, and the checkpoint writer hears that a snapshot was taken.
"""

from __future__ import annotations

from satind.core.handle import handle
from satind.node.host import Host
from satind.work.reports import Report, SnapshotTaken, WantWork


class ComputeHooks:
    def __init__(self, peer: Host) -> None:
        self.peer = peer

    def report(self, event: Report) -> None:
        self.peer.compute.soon(self._received, event)

    def _received(self, event: Report) -> None:
        peer = self.peer
        if isinstance(event, SnapshotTaken):
            peer.checkpointer.snapshot_taken()
            return
        fx = handle(peer.state, event, peer.now())
        if isinstance(event, WantWork):
            peer.thief.set_wanted(event.wanted, event.run_id)
        peer.apply(fx)
