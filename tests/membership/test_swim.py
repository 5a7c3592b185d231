"""SWIM + Lifeguard membership over the in-memory network, on trio's mock clock."""

from __future__ import annotations

import math
import random

import pytest
import trio
import trio.testing

from satind.config import MembershipConfig
from satind.membership.gossip import BroadcastQueue, retransmit_limit
from satind.membership.swim import (
    Swim,
    health_delta,
    remaining_suspicion_time,
    scale_by_health,
    suspicion_timeout,
)
from satind.membership.view import Member, MemberTable, State
from satind.net import messages as m
from satind.net.memory import LinkFaults
from satind.net.names import peer_name, slot_of
from satind.net.transport import Address
from tests.membership.harness import Cluster, start_cluster

CFG = MembershipConfig()


# -- the pure decisions ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mult", "n", "interval", "want"),
    [
        (4, 1, 1.0, 4.0),
        (4, 10, 1.0, 4.0),
        (4, 100, 1.0, 8.0),
        (4, 1000, 0.5, 6.0),
        (5, 8, 2.0, 10.0),
    ],
)
def test_suspicion_timeout_scales_with_log_n(
    mult: int, n: int, interval: float, want: float
) -> None:
    assert suspicion_timeout(mult, n, interval) == pytest.approx(want)


def test_remaining_suspicion_time_shrinks_with_confirmations() -> None:
    low, high, k = 4.0, 24.0, 2
    times = [remaining_suspicion_time(c, k, 0.0, low, high) for c in range(4)]
    assert times[0] == high and times[2] == pytest.approx(low) and times[3] == low
    assert high > times[1] > low
    assert remaining_suspicion_time(0, k, 30.0, low, high) == 0.0
    assert remaining_suspicion_time(5, 0, 1.0, low, high) == 3.0  # no confirmations expected


def test_health_and_retransmits() -> None:
    assert health_delta(True, 3, 0) == -1
    assert health_delta(False, 3, 3) == 1
    assert health_delta(False, 3, 0) == 4
    assert scale_by_health(0.5, 0) == 0.5 and scale_by_health(0.5, 3) == 2.0
    assert [retransmit_limit(4, n) for n in (1, 9, 10, 99, 1000)] == [4, 4, 8, 8, 16]


def test_broadcast_queue_combines_and_limits() -> None:
    q: BroadcastQueue[str] = BroadcastQueue()
    q.add("a", "a1")
    q.add("b", "b1")
    q.add("a", "a2")  # replaces a1
    assert sorted(q.take(10, limit=2)) == ["a2", "b1"]
    q.add("c", "c1")
    assert q.take(1, limit=2) == ["c1"]  # least sent first
    assert sorted(q.take(10, limit=2)) == ["a2", "b1", "c1"]
    assert len(q) == 0  # every item has now been sent twice


def _update(name: str, state: str, inc: int, instance: int = 1) -> m.MemberUpdate:
    return m.MemberUpdate(name, "h", 1, "c0", state, inc, instance)


def test_bandwidth_is_the_ratio_of_averaged_bytes_and_seconds_and_buffered_reads_say_nothing() -> (
    None
):
    t = MemberTable(Member("me", Address("h", 0), "c0", instance=5))
    t.measured_bandwidth("x", 1_000_000, 1.0)
    assert t.bandwidth["x"] == pytest.approx(1e6)
    # A frame read from a full buffer (the reader was busy while it came): dropped, or it
    # would claim 100 GB/s.
    t.measured_bandwidth("x", 100_000, 0.000001)
    assert t.bandwidth["x"] == pytest.approx(1e6)
    # A faster sample moves the estimate by its weight in bytes and in seconds.
    t.measured_bandwidth("x", 1_000_000, 0.1)
    assert t.bandwidth["x"] == pytest.approx(1e6 / (1.0 + 0.25 * (0.1 - 1.0)))
    t.measured_bandwidth("me", 1_000_000, 1.0)  # never of itself
    assert "me" not in t.bandwidth


def test_member_table_precedence() -> None:
    me = Member("me", Address("h", 0), "c0", instance=5)
    t = MemberTable(me)
    assert t.apply(_update("x", "alive", 1))[0]
    assert not t.apply(_update("x", "alive", 1))[0]  # old news
    assert not t.apply(_update("x", "suspect", 0))[0]  # older incarnation
    assert t.apply(_update("x", "suspect", 1))[0]
    assert not t.apply(_update("x", "alive", 1))[0]  # suspicion beats alive at equal inc
    assert t.apply(_update("x", "alive", 2))[0]  # refuted
    assert t.apply(_update("x", "dead", 2))[0]
    assert not t.apply(_update("x", "alive", 2))[0]  # the dead stay dead
    [change], _ = t.apply(_update("x", "alive", 0, instance=2))  # restarted: a new instance
    assert change.after.incarnation == 0 and change.after.alive and change.before is None
    t.apply(_update("y", "alive", 0))
    died, came = t.apply(_update("y", "alive", 0, instance=3))[0]
    # The old, unseen-dead process is gone first, then the new one arrives.
    assert (died.after.instance, died.after.state, came.after.instance) == (1, State.DEAD, 3)


def test_a_newer_instance_of_a_slot_is_a_new_member_and_the_old_one_is_dead() -> None:
    """A peer is an instance (its member name carries it): a daemon restarting b/0 at the same
    address makes a new member, and the old one dies at once, as in a crash."""
    t = MemberTable(Member(peer_name("a/0", 5), Address("h", 0), "c0", instance=5))
    old, new = peer_name("b/0", 100), peer_name("b/0", 200)
    assert old != new and slot_of(old) == slot_of(new) == "b/0"
    t.apply(_update(old, "alive", 4, instance=100))
    died, came = t.apply(_update(new, "alive", 0, instance=200))[0]
    assert died.before is not None and died.before.alive
    assert (died.after.name, died.after.state) == (old, State.DEAD)
    assert came.after.name == new and came.before is None
    assert [mem.name for mem in t.alive()] == sorted([t.me.name, new])
    # Late news of the old process, even at a higher incarnation, cannot bring it back.
    assert not t.apply(_update(old, "alive", 9, instance=100))[0]
    assert t.get(old).state == State.DEAD  # type: ignore[union-attr]
    # An old process we never knew, heard of after its replacement, is a tombstone (runs it
    # mastered are known to have lost their master).
    [buried], _ = t.apply(_update(peer_name("b/0", 50), "alive", 0, instance=50))
    assert (buried.before, buried.after.state) == (None, State.DEAD)
    assert not t.apply(_update(peer_name("b/0", 50), "alive", 3, instance=50))[0]
    assert t.newest_in("b/0") is t.get(new)
    # The same for our own slot: a restarted peer hears of its predecessor as dead.
    me = t.me.name
    [buried], _ = t.apply(_update(peer_name("a/0", 1), "alive", 2, instance=1))
    assert buried.after.state == State.DEAD and t.me.name == me and t.me.alive


def test_refutation_of_our_own_suspicion() -> None:
    me = Member("me", Address("h", 0), "c0", instance=5)
    t = MemberTable(me)
    change, refute = t.apply(m.MemberUpdate("me", "h", 0, "c0", "suspect", 0, 5))
    assert change == [] and refute is not None and refute.incarnation == 1
    assert refute.state == "alive" and t.me.incarnation == 1
    _, refute = t.apply(m.MemberUpdate("me", "h", 0, "c0", "alive", 0, 5))
    assert refute is None


# -- the protocol on the mock clock ------------------------------------------------------------


async def _cluster(
    nursery: trio.Nursery, n: int, seed: int, faults: LinkFaults | None = None
) -> Cluster:
    return await start_cluster(nursery, n, seed, CFG, faults)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_members_converge(autojump_clock: trio.testing.MockClock, seed: int) -> None:
    async with trio.open_nursery() as nursery:
        cluster = await _cluster(nursery, 12, seed)
        took = await cluster.wait_until(lambda: cluster.converged(list(cluster.nodes)), 30)
        assert took < 10
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_a_crashed_member_is_agreed_dead(
    autojump_clock: trio.testing.MockClock, seed: int
) -> None:
    async with trio.open_nursery() as nursery:
        cluster = await _cluster(nursery, 8, seed)
        await cluster.wait_until(lambda: cluster.converged(list(cluster.nodes)), 30)
        cluster.crash("n5")
        others = [n for n in cluster.nodes if n != "n5"]
        took = await cluster.wait_until(lambda: cluster.agree("n5", "dead", others), 120)
        # Detection (a few probe intervals) plus suspicion (4-24 s with confirmations).
        assert 2 < took < 40
        assert cluster.converged(others)
        nursery.cancel_scope.cancel()


async def test_a_graceful_leave_is_left_not_dead(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        cluster = await _cluster(nursery, 6, 4)
        await cluster.wait_until(lambda: cluster.converged(list(cluster.nodes)), 30)
        cluster.nodes["n2"].swim.leave()
        await trio.sleep(1)
        cluster.crash("n2")
        others = [n for n in cluster.nodes if n != "n2"]
        await cluster.wait_until(lambda: cluster.agree("n2", "left", others), 10)
        await trio.sleep(60)  # and it stays "left"
        assert cluster.agree("n2", "left", others)
        nursery.cancel_scope.cancel()


async def test_a_slow_but_alive_member_refutes_its_suspicion(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        cluster = await _cluster(nursery, 8, 5)
        await cluster.wait_until(lambda: cluster.converged(list(cluster.nodes)), 30)
        everyone = set(cluster.nodes)
        # n3 stops answering for a while (a long GIL hold, a stalled machine) ...
        cluster.network.partition({"n3"}, everyone - {"n3"})
        others = sorted(everyone - {"n3"})
        await cluster.wait_until(
            lambda: any(cluster.nodes[n].view()["n3"] == "suspect" for n in others), 30
        )
        # ... and comes back before the suspicion expires: it refutes and is never dead.
        cluster.network.heal()
        for _ in range(100):
            await trio.sleep(0.5)
            assert all(cluster.nodes[n].view()["n3"] != "dead" for n in others)
        assert cluster.agree("n3", "alive", others)
        assert cluster.nodes["n3"].swim.me.incarnation >= 1
        nursery.cancel_scope.cancel()


async def test_membership_survives_message_loss(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        cluster = await _cluster(nursery, 10, 6, LinkFaults(drop=0.05, jitter_s=0.01))
        await cluster.wait_until(lambda: cluster.converged(list(cluster.nodes)), 60)
        await trio.sleep(120)  # no false deaths under 5% loss
        assert cluster.converged(list(cluster.nodes))
        nursery.cancel_scope.cancel()


def test_log_scaling_reference() -> None:
    assert math.isclose(suspicion_timeout(4, 1000, 1.0), 12.0)


async def test_a_member_never_seen_alive_is_not_news_when_it_is_gone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A fresh daemon hears, in its first state sync, of the process that ran at its address
    # before and left: history, not a line at INFO (issue 32, point 3).
    class Host:
        def on_member_change(self, change: object) -> None: ...

    me = Member("a/0#1", Address("127.0.0.1", 1), "c0")
    swim = Swim(MembershipConfig(), MemberTable(me), Host(), random.Random(1))  # type: ignore[arg-type]
    old = Member("b/0#1", Address("127.0.0.1", 2), "c0")
    live = Member("c/0#1", Address("127.0.0.1", 3), "c0")
    with caplog.at_level("INFO", logger="satind.membership.swim"):
        swim.merge([old.update(State.LEFT), live.update()])
        swim.merge([live.update(State.LEFT)])
    said = [r.getMessage() for r in caplog.records if r.levelname == "INFO"]
    assert "member c/0#1 is left" in said
    assert not any("b/0#1" in line for line in said)


async def test_gossip_goes_to_the_recently_dead_but_not_to_replaced_instances(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A dead member may refute (a healed partition) and hears of its death by gossip; an
    # instance a newer one of its slot replaced cannot, and its address answers as the new
    # one: dialling it is a refused handshake each time.
    class Host:
        def on_member_change(self, change: object) -> None: ...

    me = Member("a/0#1", Address("127.0.0.1", 1), "c0", instance=1)
    swim = Swim(MembershipConfig(), MemberTable(me), Host(), random.Random(1))  # type: ignore[arg-type]
    old = Member("b/0#1", Address("127.0.0.1", 2), "c0", instance=1)
    dead = Member("c/0#1", Address("127.0.0.1", 3), "c0", instance=1)
    swim.merge([old.update(), dead.update()])
    swim.merge([dead.update(State.DEAD)])
    swim.merge([Member("b/0#2", Address("127.0.0.1", 2), "c0", instance=2).update()])
    assert swim.table.get("b/0#1").state == State.DEAD  # type: ignore[union-attr]
    assert sorted(swim._gossip_targets()) == ["b/0#2", "c/0#1"]
