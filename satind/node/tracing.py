"""The node's side of run traces (satind/trace.py): recovery events, and answering for them.

``RecoveryWatch`` notices recovery on this peer after the core's effects are applied — jobs
put back after their thief was lost, orphan results reused, a run's new master or epoch, a
drain — by comparing a few counters with their last values (no hook inside the core: it
stays sans-I/O), and records an instant on the trace of every run active here.

``on_trace_request`` answers ``TraceRequest``: this peer's events of a run (with the names of
the other members, so that a client asks for each in turn), or another member's, relayed.
One peer's events per reply keeps every frame within the caps (``trace.max_events``).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

from satind.net import messages as m
from satind.net.names import slot_of
from satind.node.host import Host
from satind.node.rpc import ask

if TYPE_CHECKING:
    from satind.net.transport import Link


# runs. The masters of this many runs are remembered for the run history.
KEPT_MASTERS = 256


class RecoveryWatch:
    """What recovery looked like after the last effects applied (see the module's doc)."""

    def __init__(self) -> None:
        self.restarted = 0
        self.reused = 0
        self.draining = False
        self.masters: dict[str, tuple[str, int]] = {}
        # Every master each run had here, as "SLOT@EPOCH", the first first (for the run
        # history: node/recorder.py); bounded, the oldest runs go.
        self.masters_seen: OrderedDict[str, list[str]] = OrderedDict()

    def check(self, peer: Host) -> None:
        state = peer.state
        active = state.runs.active
        restarted = state.steal.jobs_restarted
        reused = state.orphans.counters.results_reused
        traces = peer.traces
        if restarted != self.restarted:
            traces.instant(active, "jobs restarted", f"{restarted - self.restarted} put back")
            self.restarted = restarted
        if reused != self.reused:
            traces.instant(active, "orphans reused", f"{reused - self.reused} results")
            self.reused = reused
        if state.draining != self.draining:
            self.draining = state.draining
            traces.instant(active, "drain" if self.draining else "drain over")
        for run_id, run in active.items():
            now = (run.info.master, run.info.epoch)
            before = self.masters.get(run_id)
            if before != now:
                self.masters[run_id] = now
                seen = self.masters_seen.setdefault(run_id, [])
                seen.append(f"{slot_of(now[0])}@{now[1]}")
                while len(self.masters_seen) > KEPT_MASTERS:
                    self.masters_seen.popitem(last=False)
                if before is not None:
                    traces.instant([run_id], "new master", f"{now[0]}, epoch {now[1]}")
        if len(self.masters) > len(active):
            self.masters = {k: v for k, v in self.masters.items() if k in active}


def on_trace_request(peer: Host, link: Link, msg: m.TraceRequest) -> None:
    if msg.peer in ("", peer.name):
        peer.traces.flush()
        trace = peer.traces.get(msg.run_id)
        events = list(trace.events) if trace is not None else []
        members = peer.others() if not msg.peer else []
        reply = m.TraceReply(
            msg.req, msg.run_id, peer.name, events, trace.dropped if trace else 0, members
        )
        link.post(reply)
        return

    async def relay() -> None:
        got = await ask(
            peer,
            msg.peer,
            lambda req: m.TraceRequest(req, msg.run_id, msg.peer),
            m.TraceReply,
            peer.cfg.client.timeout_s,
        )
        if got is None:
            why = f"{msg.peer} did not answer"
            link.post(m.TraceReply(msg.req, msg.run_id, msg.peer, [], error=why))
        else:
            link.post(m.TraceReply(msg.req, got.run_id, got.peer, got.events, got.dropped))

    peer.spawn_answer(link, msg.req, relay)
