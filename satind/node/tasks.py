"""The peer's background tasks: procedures that wait for other members (a run's finish, a
result to forward, a request answered after asking around) run as tasks in the peer's one
nursery. A task that raises is logged and costs that task only — it must never take the peer
down — and a task that answers a request answers it with an ``ErrorReply`` at once instead of
leaving the asker to its timeout. Requests answered from tasks are bounded per connection
(``net.max_requests_in_flight``), so a client cannot make a peer hold unbounded work.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from satind.net import messages as m
from satind.net.transport import Link
from satind.work.errors import error_info

log = logging.getLogger(__name__)


class Tasks:
    def __init__(self, max_in_flight: int) -> None:
        self.max_in_flight = max_in_flight
        self.nursery: trio.Nursery | None = None  # the peer's, once it runs
        # Requests answered from tasks, in flight per connection.
        self.in_flight: dict[int, int] = {}

    def busy(self, conn: object) -> bool:
        """Whether a connection has requests in flight (the transport keeps it open)."""
        return id(conn) in self.in_flight

    def spawn(self, fn: Any, *args: Any) -> None:
        """Run ``fn(*args)`` in the peer's nursery; an exception in it is logged. A peer that
        is stopping (its nursery closed) starts nothing new: nothing would finish it."""
        assert self.nursery is not None
        try:
            self.nursery.start_soon(self._guarded, fn, args, None)
        except RuntimeError:  # "Nursery is closed to new arrivals"
            log.debug("stopping: %s not started", getattr(fn, "__qualname__", fn))

    def answer(self, link: Link, req: int, fn: Any, *args: Any) -> None:
        """As ``spawn``, for a task that answers request ``req``: if it fails, the asker gets
        an ErrorReply at once."""
        assert self.nursery is not None
        key = id(link)
        if self.in_flight.get(key, 0) >= self.max_in_flight:
            why = (
                f"more than {self.max_in_flight} requests in flight on this "
                "connection (net.max_requests_in_flight): wait for answers before asking more"
            )
            link.post(m.ErrorReply(req, m.ErrorInfo("TooManyRequests", why)))
            return
        try:
            self.nursery.start_soon(self._answering, key, fn, args, (link, req))
        except RuntimeError:  # stopping: the asker's request times out, as for a lost peer
            log.debug("stopping: request %d not answered", req)
            return
        self.in_flight[key] = self.in_flight.get(key, 0) + 1

    async def _answering(
        self, key: int, fn: Any, args: tuple[Any, ...], asker: tuple[Link, int]
    ) -> None:
        try:
            await self._guarded(fn, args, asker)
        finally:
            left = self.in_flight.pop(key) - 1
            if left:
                self.in_flight[key] = left

    async def _guarded(
        self, fn: Any, args: tuple[Any, ...], asker: tuple[Link, int] | None
    ) -> None:
        try:
            await fn(*args)
        except Exception as exc:
            log.error("%s failed", getattr(fn, "__qualname__", fn), exc_info=exc)
            if asker is not None:
                link, req = asker
                link.post(m.ErrorReply(req, error_info(exc)))
