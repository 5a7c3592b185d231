"""Request/reply correlation, including the reply that lands with its timeout."""

from __future__ import annotations

import trio
import trio.testing

from satind.net import messages as m
from satind.net.requests import Requests


async def test_reply_and_timeout() -> None:
    requests = Requests()
    req = requests.new()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lambda: _resolve_later(requests, req, 0.1))
        reply = await requests.reply_within(req, 5)
    assert reply == m.Nack(1)
    req = requests.new()
    assert await requests.reply_within(req, 0.01) is None
    assert not requests.resolve(req, m.Nack(2))  # late: nobody waits, the caller is told


async def _resolve_later(requests: Requests, req: int, delay: float) -> None:
    await trio.sleep(delay)
    assert requests.resolve(req, m.Nack(1))


async def test_reply_landing_with_the_timeout_is_not_lost(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The waiter's deadline and the reply fall on the same instant: whichever order trio
    # runs them in, a reply that resolve() accepted must be returned, never dropped.
    for _ in range(20):
        requests = Requests()
        req = requests.new()
        accepted: list[bool] = []

        async def replier(
            requests: Requests = requests, req: int = req, accepted: list[bool] = accepted
        ) -> None:
            await trio.sleep(1.0)
            accepted.append(requests.resolve(req, m.Nack(7)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(replier)
            reply = await requests.reply_within(req, 1.0)
        assert (reply is not None) == accepted[0], "an accepted reply was dropped"
