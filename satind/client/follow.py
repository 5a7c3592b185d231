"""Following a run after the peer a client waited on was lost: ask the run's other
contacts (``Submitted.contacts``) in turn until one answers with its result."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import trio

from satind.client.client import PeerUnavailable, RequestFailed, RunLost, connect
from satind.config import Config
from satind.net import messages as m
from satind.net import tls
from satind.net.transport import Address

log = logging.getLogger("satind.client.client")


async def follow_result(
    run_id: str,
    contacts: Sequence[Address],
    cfg: Config,
    credentials: tls.Credentials | None,
) -> m.RunResult:
    """A run's result, after the peer a client waited on was lost: ask the contacts in turn
    to wait for it (each relays to whichever peer masters the run by then, an elected one if
    the master was lost). A contact that does not know the run yet (a peer the daemon just
    restarted, still joining) is asked again later; after ``client.follow_s`` without any
    contact that knows the run, give up.

    Raises:
        RunLost: no contact knew the run for ``client.follow_s``, or one knew it had ended
            without a result that is still kept.
    """
    if not contacts:
        raise RunLost(f"no other peer to ask for run {run_id}")
    patience = cfg.client.follow_s
    deadline = trio.current_time() + patience
    delay = cfg.client.follow_retry_min_s
    why = ""
    while trio.current_time() < deadline:
        for address in contacts:
            asked = trio.current_time()
            try:
                async with connect(address, cfg, credentials) as client:
                    reply = await client.fetch_result(run_id, True, cfg.client.timeout_s)
            except (PeerUnavailable, RequestFailed) as exc:
                why = str(exc)
                if trio.current_time() - asked > 1.0:
                    # It knew the run and waited for it, then went away too: keep looking.
                    deadline = trio.current_time() + patience
                continue
            if reply.result is not None:
                return reply.result
            why = f"{address}: {reply.error}"
            if not reply.error.startswith("no run"):
                raise RunLost(f"run {run_id}: {reply.error}")
        log.info("no peer knows run %s yet (%s); asking again", run_id, why)
        await trio.sleep(delay)
        delay = min(2 * delay, cfg.client.follow_retry_max_s)
    raise RunLost(
        f"no peer knew run {run_id} for {patience:g} s (client.follow_s); last answer: {why}"
    )
