"""Finding the system again (membership/rejoin.py): the two sides of a healed partition, a
member restarted without seeds after it crashed or left, remembered members, another instance
met at a member's address, and the warning of a split that does not heal."""

from __future__ import annotations

import logging
import random

import pytest
import trio
import trio.testing

from satind.config import MembershipConfig
from satind.membership.rejoin import Rejoin
from satind.membership.view import Member, MemberTable, State
from satind.net.memory import MemoryNetwork
from satind.net.transport import Address
from tests.membership.harness import Cluster, start_cluster

CFG = MembershipConfig()


async def _cluster(nursery: trio.Nursery, n: int, seed: int) -> Cluster:
    cluster = await start_cluster(nursery, n, seed, CFG)
    await cluster.wait_until(lambda: cluster.converged(list(cluster.nodes)), 30)
    return cluster


def _sees_dead(cluster: Cluster, who: list[str], whom: list[str]) -> bool:
    return all(cluster.nodes[a].view().get(b) == "dead" for a in who for b in whom)


@pytest.mark.parametrize(("minutes", "seed"), [(1, 1), (1, 2), (5, 3), (5, 4)])
async def test_the_sides_of_a_long_partition_are_one_system_soon_after_it_heals(
    autojump_clock: trio.testing.MockClock, minutes: int, seed: int
) -> None:
    """Each side declares the other dead (well past gossip_to_dead_s); after the heal the
    reconnect loop brings them together within a few reconnect intervals."""
    async with trio.open_nursery() as nursery:
        cluster = await _cluster(nursery, 8, seed)
        side_a, side_b = [f"n{i}" for i in range(4)], [f"n{i}" for i in range(4, 8)]
        cluster.network.partition(set(side_a), set(side_b))
        await trio.sleep(60 * minutes)
        assert _sees_dead(cluster, side_a, side_b)
        assert _sees_dead(cluster, side_b, side_a)
        cluster.network.heal()
        took = await cluster.wait_until(lambda: cluster.converged(list(cluster.nodes)), 60)
        assert took < 10
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("how", ["crash", "leave"])
async def test_the_first_member_restarted_without_seeds_is_found_by_the_others(
    autojump_clock: trio.testing.MockClock, how: str
) -> None:
    """The system's first member (no seeds) goes — crashed or left — and comes back long
    after, a new process at the same address that knows nobody: the others' reconnects find
    it (nobody probes a dead or left member, and gossip to the dead has long stopped)."""
    async with trio.open_nursery() as nursery:
        cluster = await _cluster(nursery, 4, 7)
        others = ["n1", "n2", "n3"]
        if how == "leave":
            cluster.nodes["n0"].swim.leave()
            await trio.sleep(1)
        cluster.crash("n0")
        state = "left" if how == "leave" else "dead"
        await cluster.wait_until(lambda: cluster.agree("n0", state, others), 60)
        await trio.sleep(120)
        new = await cluster.start(nursery, 0, instance=5000)
        nursery.start_soon(new.swim.join, [])
        alive = [new.name, *others]
        took = await cluster.wait_until(lambda: cluster.converged(alive), 60)
        assert took < 10
        # The old process is a replaced instance everywhere: gone, never to come back.
        assert all(cluster.nodes[n].view().get("n0") in ("dead", "left") for n in alive)
        nursery.cancel_scope.cancel()


async def test_a_restarted_member_rejoins_through_the_members_it_remembered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        cluster = await _cluster(nursery, 3, 8)
        cluster.crash("n0")
        new = await cluster.start(nursery, 0, instance=5000)
        joined = False

        async def join() -> None:
            nonlocal joined
            joined = await new.swim.join([], [cluster.address(0), cluster.address(2)])

        nursery.start_soon(join)
        took = await cluster.wait_until(lambda: cluster.converged([new.name, "n1", "n2"]), 30)
        assert joined and took < 2  # at once, not after a reconnect interval
        nursery.cancel_scope.cancel()


async def test_remembered_members_that_never_answer_let_it_start_on_its_own(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with trio.open_nursery() as nursery:
        network = MemoryNetwork(random.Random(1))
        nursery.start_soon(network.run)
        cluster = Cluster(network, CFG, 1)
        node = await cluster.start(nursery, 0)
        began = trio.current_time()
        with caplog.at_level(logging.WARNING, logger="satind.membership.swim"):
            assert await node.swim.join([], [Address("10.0.0.9", 1)])
        assert trio.current_time() - began == pytest.approx(CFG.rejoin_timeout_s, abs=1)
        assert node.swim.synced
        assert any("starting on its own" in r.getMessage() for r in caplog.records)
        nursery.cancel_scope.cancel()


def _rejoin(now: list[float]) -> tuple[Rejoin, MemberTable, list[Address]]:
    me = Member("a/0#1", Address("10.0.0.1", 7420), "c0", instance=1)
    rejoin = Rejoin(CFG, me.name, random.Random(1), lambda: now[0])
    synced: list[Address] = []
    rejoin.sync = synced.append
    return rejoin, MemberTable(me), synced


def test_another_process_of_the_dialled_slot_gets_a_state_sync_once_per_probe_interval() -> None:
    now = [100.0]
    rejoin, _, synced = _rejoin(now)
    at = Address("10.0.0.2", 7420)
    assert rejoin.met_other(at, "b/0#1", "b/0#2")
    assert not rejoin.met_other(at, "b/0#1", "b/0#2")  # the same probe interval
    now[0] += CFG.probe_interval_s
    assert rejoin.met_other(at, "b/0#1", "b/0#2")
    # Another slot answering (a reused port, a mistake): nothing to learn from it.
    assert not rejoin.met_other(Address("10.0.0.3", 7420), "b/0#1", "c/0#1")
    assert synced == [at, at]


def test_reconnects_go_to_gone_slots_and_to_the_seeds_only_while_alone() -> None:
    now = [0.0]
    rejoin, table, synced = _rejoin(now)
    seed = Address("10.0.0.9", 7420)
    rejoin.remember([seed])
    b1 = Member("b/0#1", Address("10.0.0.2", 7420), "c0", instance=1)
    c1 = Member("c/0#1", Address("10.0.0.3", 7420), "c0", instance=1)
    for member in (b1, c1):
        table.apply(member.update())
        rejoin.seen(member)
    assert rejoin.candidates(table) == []  # everyone alive, another machine in sight
    table.apply(b1.update(State.DEAD))
    assert rejoin.candidates(table) == [b1.address]
    # Its slot restarted and the new process is alive: nothing to look for there.
    b2 = Member("b/0#2", Address("10.0.0.2", 7420), "c0", instance=2)
    table.apply(b2.update())
    assert rejoin.candidates(table) == []
    table.apply(c1.update(State.LEFT))
    table.apply(b2.update(State.DEAD))
    # Alone now: the seeds too.
    assert sorted(map(str, rejoin.candidates(table))) == sorted(
        map(str, [b1.address, c1.address, seed])
    )
    assert rejoin.tick(table) in {b1.address, c1.address, seed}
    assert len(synced) == 1
    # A slot not seen alive for reconnect_timeout_s is given up (the seeds are not).
    now[0] += CFG.reconnect_timeout_s + 1
    assert rejoin.candidates(table) == [seed]


def test_a_split_that_does_not_heal_is_said_at_warning(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    rejoin, table, _ = _rejoin(now)
    other = Member("b/0#1", Address("10.0.0.2", 7420), "c0", instance=1)
    table.apply(other.update())
    rejoin.seen(other)
    table.apply(other.update(State.DEAD))
    with caplog.at_level(logging.WARNING, logger="satind.membership.swim"):
        for _ in range(int(CFG.split_warning_s / CFG.reconnect_interval_s) + 2):
            rejoin.tick(table)
            now[0] += CFG.reconnect_interval_s
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(said) == 1
    assert "has seen no peer of another machine alive" in said[0]
    assert "10.0.0.2:7420" in said[0] and "--advertise" in said[0]


async def test_a_join_that_gave_up_goes_on_until_a_seed_answers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The seed was down for longer than join_timeout_s: the join gives up (the peer says so)
    but the reconnect loop keeps trying the seed, and the member joins once it is up."""
    async with trio.open_nursery() as nursery:
        network = MemoryNetwork(random.Random(3))
        nursery.start_soon(network.run)
        cluster = Cluster(network, CFG, 3)
        late = await cluster.start(nursery, 1)
        assert not await late.swim.join([cluster.address(0)])  # n0 is not there
        seed = await cluster.start(nursery, 0)
        assert await seed.swim.join([])
        with trio.fail_after(30):
            await late.swim.joined()
        took = await cluster.wait_until(lambda: cluster.converged(["n0", "n1"]), 30)
        assert took < 10
        nursery.cancel_scope.cancel()
