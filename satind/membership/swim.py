"""SWIM failure detection with the Lifeguard refinements, gossip and push-pull (after
hashicorp/memberlist: state.go, suspicion.go, awareness.go).

* **Probe.** Every probe interval a member pings the next member of a shuffled round robin. No
  ack within the probe timeout: it asks ``indirect_checks`` others to ping the target
  (PingReq); they relay the ack, or a Nack when they got none. Still nothing at the end of the
  interval: the target is **suspect**.
* **Suspicion** lasts between ``suspicion_timeout`` and ``suspicion_max_mult`` times that,
  shrinking as independent members confirm it (Lifeguard), unless the suspect refutes it with
  a higher incarnation; then it is **dead**.
* **Local health** (Lifeguard awareness): failed probes and missed nacks raise a score, successes
  lower it; probe timeouts and intervals are scaled by (score + 1), so a peer that is itself
  slow (a long GIL hold, an overloaded machine) suspects others less eagerly.
* **Gossip.** Updates ride on every ping and ack and go out in gossip rounds to a few random
  members, each sent a limited number of times (gossip.py). Accepted news is re-gossiped, so it
  spreads epidemically.
* **Push-pull.** A joiner exchanges its full state with a seed; every member does the same with
  a random member now and then, repairing whatever gossip missed.
* **Leave.** A leaving member tells everyone it has left (not died) before it goes.
* **Rejoin.** A restarted member, a healed partition's two sides, a join that found nobody:
  state syncs with the addresses of members gone from view, with a process met at a member's
  address under another name, and with remembered members (membership/rejoin.py).

The decisions are pure functions (``membership/rules.py``); the service only sleeps, sends and
applies them. Its parts: ``membership/state.py`` (what they share), ``membership/updates.py``
(merging news, suspicion, tombstones), ``membership/spreading.py`` (gossip, push-pull, join),
``membership/probing.py`` (probes and their answers); ``Swim`` here runs their loops and
announces this member's own changes.
"""

from __future__ import annotations

import trio

from satind.membership.probing import Probing
from satind.membership.rules import health_delta as health_delta
from satind.membership.rules import push_pull_interval as push_pull_interval
from satind.membership.rules import remaining_suspicion_time as remaining_suspicion_time
from satind.membership.rules import scale_by_health as scale_by_health
from satind.membership.rules import suspicion_timeout as suspicion_timeout
from satind.membership.state import Link as Link
from satind.membership.state import SwimHost as SwimHost
from satind.membership.view import State
from satind.net import messages as m
from satind.net.parties import Address


class Swim(Probing):
    """The SWIM failure detector of one member: ``run`` its loops, ``join``, ``leave``."""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Probe, gossip, sync state and expire suspicions until cancelled."""
        self.rejoin.sync = self._sync_with
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._probe_loop)
                nursery.start_soon(self._gossip_loop)
                nursery.start_soon(self._push_pull_loop)
                nursery.start_soon(self._housekeeping_loop)
                nursery.start_soon(self._reconnect_loop)
                task_status.started()
        finally:
            # Stopped (the peer left): a message handled after this starts no task here (a
            # PingReq delivered late to a drained peer raised "Nursery is closed").
            self._nursery = None

    def _sync_with(self, address: Address) -> None:
        """A state sync to whoever answers at ``address`` (rejoin's dials: quiet)."""
        self.host.post_address(address, self.state_message(join=False, reply=False), quiet=True)

    async def _reconnect_loop(self) -> None:
        interval = self.cfg.reconnect_interval_s
        await self._jitter(interval)
        while True:
            # Also before a join succeeded: a join that gave up (its seeds were down for
            # join_timeout_s) goes on here, through the seeds, until one answers.
            if self.me.state == State.ALIVE:
                self.rejoin.tick(self.table)
            await trio.sleep(interval)

    def met_other(self, address: Address, dialled: str, answered: str) -> None:
        """The transport dialled member ``dialled`` at ``address`` and ``answered`` answered
        (net/transport.py): a restarted slot's new process, perhaps (rejoin.met_other)."""
        if self.me.state == State.ALIVE:
            self.rejoin.met_other(address, dialled, answered)

    def leave(self) -> None:
        """Tell every member we leave (not die), directly, and gossip it as well."""
        update = self.table.set_state_of_me(State.LEFT)
        self._broadcast(update)
        for member in self.table.alive():
            if member.name != self.me.name:
                self.host.post(member.name, m.Gossip(m.Broadcasts([update], [])))

    def set_plugins(self, plugins: dict[str, str]) -> None:
        """Gossip our new plugin list (name -> code hash): masters check it before a run."""
        self._broadcast(self.table.set_plugins_of_me(plugins))

    def set_draining(self) -> None:
        update = self.table.set_state_of_me(State.ALIVE, draining=True)
        self._broadcast(update)

    def set_reclaimed(self, reclaimed: bool) -> None:
        """Reclaimed by the machine's owner, or released: every member hears it at once."""
        self._broadcast(self.table.set_state_of_me(State.ALIVE, reclaimed=reclaimed))
