"""The compute side's hooks (``engine.frames.WorkerHooks``) for a peer: each hands its event to
the network side through the compute driver (``soon``), where the core decides.

They are called on the compute side and must not block: the real driver hops to the trio
thread with ``TrioToken.run_sync_soon``, the simulator's runs them after the compute side's
turn.
"""

from __future__ import annotations

from typing import Any

from satind.core import aborts, drain, iterative, kinds, orphans, sharing, spmd, thief
from satind.net import messages as m
from satind.node.host import Host
from satind.work.jobs import Job


class ComputeHooks:
    def __init__(self, peer: Host) -> None:
        self.peer = peer

    def want_work(self, wanted: bool, run_id: str = "") -> None:
        # The frame count is read here, on the compute side, so that it reaches the network
        # side in order with the results of the frames that ended before (job_finished).
        self.peer.compute.soon(self._set_idle, wanted, self.peer.worker.nesting, run_id)

    def _set_idle(self, idle: bool, frames: int, run_id: str) -> None:
        self.peer.state.worker_idle = idle
        self.peer.state.worker_frames = frames
        self.peer.thief.set_wanted(idle, run_id)
        self.peer.changed()

    def job_finished(self, job: Job) -> None:
        self.peer.compute.soon(lambda: self.peer.apply(thief.job_finished(self.peer.state, job)))

    def orphan_hit(self, job: Job, holder: str) -> None:
        self.peer.compute.soon(
            lambda: self.peer.apply(
                orphans.fetch_orphan(self.peer.state, job, holder, self.peer.now())
            )
        )

    def orphan_result(self, job: Job, value: bytes) -> None:
        self.peer.compute.soon(
            lambda: self.peer.apply(orphans.keep_finished(self.peer.state, job, value))
        )

    def subtree_dropped(self, job: Job) -> None:
        self.peer.compute.soon(self._dropped, job)

    def _dropped(self, job: Job) -> None:
        state = self.peer.state
        if aborts.dropped(state, job):
            self.peer.changed()  # a drain may wait for it
        else:
            self.peer.apply(drain.root_dropped(state, job, self.peer.now()))

    def children_aborted(self, frame: Job) -> None:
        self.peer.compute.soon(
            lambda: self.peer.apply(aborts.children_aborted(self.peer.state, frame))
        )

    def shared_update(self, update: m.SharedUpdate) -> None:
        self.peer.compute.soon(lambda: self.peer.apply(sharing.call_made(self.peer.state, update)))

    def shared_send(
        self, peer: str, msg: m.ReplicaReply | m.SharedDigest | m.SharedUpdates
    ) -> None:
        self.peer.compute.soon(
            lambda: self.peer.apply(sharing.shared_send(self.peer.state, peer, msg))
        )

    def guard_waiting(self, job: Job, waiting: bool = True) -> None:
        self.peer.compute.soon(
            lambda: self.peer.apply(sharing.guard_waiting(self.peer.state, job, waiting))
        )

    def result_waiting(self, job: Job, sender: str, waiting: bool = True) -> None:
        self.peer.compute.soon(
            lambda: self.peer.apply(sharing.result_waiting(self.peer.state, job, sender, waiting))
        )

    def task_ready(self, job: Job) -> None:
        self.peer.compute.soon(
            lambda: self.peer.apply(kinds.task_ready(self.peer.state, job, self.peer.now()))
        )

    def entity_done(
        self,
        run_id: str,
        entity: int,
        gen: int,
        iteration: int,
        state: Any,
        ghosts: dict[int, bytes],
        measured: tuple[float, float, int],
    ) -> None:
        self.peer.compute.soon(
            lambda: self.peer.apply(
                spmd.entity_done(
                    self.peer.state,
                    run_id,
                    entity,
                    gen,
                    iteration,
                    state,
                    ghosts,
                    measured,
                    self.peer.now(),
                )
            )
        )

    def spmd_iteration(self, run_id: str, iteration: int, profiles: list[Any]) -> None:
        self.peer.compute.soon(spmd.profile, self.peer.state, run_id, iteration, profiles)

    def barrier(self, run_id: str, iteration: int, state: bytes) -> None:
        self.peer.compute.soon(
            lambda: self.peer.apply(iterative.barrier(self.peer.state, run_id, iteration, state))
        )

    def job_logged(self, job: Job, value: bytes) -> None:
        result = m.JobResult(job.run.run_id, job.path, value, None)
        self.peer.compute.soon(self.peer.checkpointer.result, result)

    def snapshot_taken(self) -> None:
        self.peer.compute.soon(self.peer.checkpointer.snapshot_taken)
