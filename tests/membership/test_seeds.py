"""Seeds by name (membership/seeds.py): a name stands for every address it resolves to, a
joiner sends its join to each of them but its own, and resolves the name again at each try."""

from __future__ import annotations

import random

import pytest
import trio
import trio.testing

from satind.config import MembershipConfig
from satind.membership.seeds import resolve_seeds, system_resolver
from satind.net.memory import MemoryNetwork
from satind.net.transport import Address
from tests.membership.harness import Cluster

CFG = MembershipConfig()
PORT = 7420


class FakeDNS:
    """A resolver from a table that a test changes as it goes; counts the look-ups."""

    def __init__(self, records: dict[str, list[str]]) -> None:
        self.records = records
        self.lookups = 0

    async def __call__(self, host: str, port: int) -> list[str]:
        self.lookups += 1
        if host not in self.records:
            raise OSError(f"{host}: name or service not known")
        return list(self.records[host])


class Pods(Cluster):
    """Members as pods behind a headless Service: one address each, all on the same port."""

    def address(self, i: int) -> Address:
        return Address(f"10.0.0.{i + 1}", PORT)


# -- resolution -------------------------------------------------------------------------------


async def test_a_name_stands_for_every_address_it_resolves_to() -> None:
    dns = FakeDNS({"peers.svc": ["10.0.0.2", "10.0.0.1", "10.0.0.2"], "other": ["10.0.0.9"]})
    seeds = [Address("peers.svc", PORT), Address("10.0.0.1", PORT), Address("other", 7000)]
    got = await resolve_seeds(seeds, dns)
    # In the seeds' order, each address once (the literal is already there), with its port.
    assert got == [Address("10.0.0.2", PORT), Address("10.0.0.1", PORT), Address("10.0.0.9", 7000)]


async def test_literals_are_never_looked_up_and_a_name_that_does_not_resolve_gives_nothing() -> (
    None
):
    dns = FakeDNS({})
    seeds = [Address("10.1.2.3", PORT), Address("::1", PORT), Address("not-yet.svc", PORT)]
    assert await resolve_seeds(seeds, dns) == seeds[:2]
    assert dns.lookups == 1  # the name only: the simulator's literal addresses never touch DNS


async def test_localhost_resolves_through_the_system_resolver() -> None:
    with trio.fail_after(10):
        got = await resolve_seeds([Address("localhost", PORT)], system_resolver)
    assert Address("127.0.0.1", PORT) in got
    assert all(a.port == PORT for a in got)


# -- joining through a name ---------------------------------------------------------------------


async def _pods(nursery: trio.Nursery, seed: int) -> Pods:
    network = MemoryNetwork(random.Random(seed))
    nursery.start_soon(network.run)
    return Pods(network, CFG, seed)


async def test_a_join_reaches_the_peer_that_answers_among_all_the_name_gives(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            pods = await _pods(nursery, 1)
            first = await pods.start(nursery, 0)
            assert await first.swim.join([])
            # The name lists a pod that does not answer (not started), the joiner itself, and
            # the first pod, last: only trying every address finds it.
            dns = FakeDNS({"satind": ["10.0.0.3", "10.0.0.2", "10.0.0.1"]})
            joiner = await pods.start(nursery, 1)
            joiner.swim.resolve = dns
            started = trio.current_time()
            assert await joiner.swim.join([Address("satind", PORT)])
            assert trio.current_time() - started < CFG.join_retry_s  # the first try
            await pods.wait_until(lambda: pods.converged(["n0", "n1"]), 10)
            nursery.cancel_scope.cancel()


async def test_the_name_is_resolved_again_at_each_try_so_later_pods_are_found(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            pods = await _pods(nursery, 2)
            dns = FakeDNS({})  # nothing published yet
            joiner = await pods.start(nursery, 1)
            joiner.swim.resolve = dns
            joined = trio.Event()

            async def join() -> None:
                assert await joiner.swim.join([Address("satind", PORT)])
                joined.set()

            nursery.start_soon(join)
            await trio.sleep(3 * CFG.join_retry_s)
            assert not joined.is_set() and dns.lookups >= 3
            # A pod starts later, and the name gets its address (and the joiner's own).
            first = await pods.start(nursery, 0)
            assert await first.swim.join([])
            dns.records["satind"] = ["10.0.0.2", "10.0.0.1"]
            with trio.fail_after(2 * CFG.join_retry_s):
                await joined.wait()
            await pods.wait_until(lambda: pods.converged(["n0", "n1"]), 10)
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("records", "starts_alone"),
    [
        # The first pod: the name lists only itself until the join's time is up.
        ({"satind": ["10.0.0.1"]}, True),
        # The name never resolves (DNS down, a typo): no proof of being first.
        ({}, False),
        # Another pod is listed but never answers: no proof either.
        ({"satind": ["10.0.0.1", "10.0.0.2"]}, False),
    ],
)
async def test_a_peer_the_name_lists_alone_starts_the_system_after_the_join_timeout(
    autojump_clock: trio.testing.MockClock, records: dict[str, list[str]], starts_alone: bool
) -> None:
    with trio.fail_after(120):
        async with trio.open_nursery() as nursery:
            pods = await _pods(nursery, 3)
            only = await pods.start(nursery, 0)
            only.swim.resolve = FakeDNS(records)
            started = trio.current_time()
            assert await only.swim.join([Address("satind", PORT)]) is starts_alone
            assert only.swim.synced is starts_alone
            assert trio.current_time() - started == pytest.approx(CFG.join_timeout_s)
            nursery.cancel_scope.cancel()
