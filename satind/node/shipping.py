"""Shipped code on a peer (plugin/shipped.py): taking a version from a client's submission,
fetching one a run needs from another member, and giving one to a member that asks.

Each step that touches the code — checking its hash and names, writing it to the cache,
vetting it in a process of its own, importing it — runs off the network side (a worker
thread), and what it made of it goes to the core as ``CodeArrived`` (core/shipping.py). The
cache is made on first use: a peer that is never sent code has none.
"""

from __future__ import annotations

import logging
from pathlib import Path

import trio

from satind.core.effects import FetchCode, Link
from satind.core.handle import handle
from satind.core.shipping import CodeArrived
from satind.net import messages as m
from satind.node.host import Host
from satind.node.permissions import client_name
from satind.node.rpc import ask
from satind.plugin import Plugin, requirements
from satind.plugin import shipped as code

log = logging.getLogger(__name__)


def cache_of(peer: Host) -> code.Cache:
    if peer.code_cache is None:
        limits = peer.cfg.plugins
        # A directory of its own per peer process under a configured one: peers of a daemon
        # never evict or rewrite a version another is vetting or serving.
        root = (
            str(Path(limits.shipped_dir) / peer.name.replace("/", "-"))
            if limits.shipped_dir
            else ""
        )
        peer.code_cache = code.Cache(root, limits.shipped_keep)
    return peer.code_cache


async def receive(peer: Host, link: Link, msg: m.Submit) -> str:
    """Take the code a submission ships: checked, stored, vetted, loaded, known to the core.
    Returns why not ("" when it is in)."""
    limits = peer.cfg.plugins
    if not limits.accept_shipped:
        return (
            f"peer {peer.name} does not accept shipped code ([plugins] accept_shipped is "
            "off, the default: shipped code runs on every peer); install the plugin on every "
            "peer (--plugin-path), or ask the operator to accept shipped code"
        )
    who = client_name(link)
    size = sum(len(data) for data in msg.files.values())
    log.info(
        "client %s ships code %s for plugin %s (%d files, %d bytes)",
        who,
        msg.code_hash,
        msg.plugin,
        len(msg.files),
        size,
    )
    return await _take(peer, msg.code_hash, msg.files, f"from client {who}")


async def fetch(peer: Host, fx: FetchCode) -> None:
    """Get a version a run needs from the members named (in turn) and tell the core."""
    why = "no member to ask"
    if not peer.cfg.plugins.accept_shipped:  # (the core asks only when it does: a backstop)
        why = f"peer {peer.name} does not accept shipped code"
        peer.apply(handle(peer.state, CodeArrived(fx.code_hash, error=why), peer.now()))
        return
    limits = peer.cfg.plugins
    for round_ in range(max(1, limits.fetch_rounds)):
        if round_:
            await trio.sleep(limits.fetch_pause_s)
        unanswered = False
        for source in fx.sources:
            reply = await ask(
                peer,
                source,
                lambda req: m.CodeRequest(req, fx.code_hash),
                m.CodeReply,
                peer.cfg.client.timeout_s,
            )
            if reply is None:
                why, unanswered = f"{source} did not answer", True
                continue
            if reply.error:
                why = f"{source}: {reply.error}"
                continue
            why = await _take(peer, fx.code_hash, reply.files, f"from {source}")
            if not why:
                return
        if not unanswered:
            break  # every member answered: no such code, or code that is bad
        log.info("shipped code %s: no member answered, asking again", fx.code_hash[:12])
    _failed(peer, fx, why)


def _failed(peer: Host, fx: FetchCode, why: str) -> None:
    """The runs of this version are refused here, saying why (core/shipping.py)."""
    log.error("could not get shipped code %s: %s", fx.code_hash[:12], why)
    peer.apply(handle(peer.state, CodeArrived(fx.code_hash, error=why), peer.now()))


def on_code_request(peer: Host, link: Link, msg: m.CodeRequest) -> None:
    """A member asks for a version: the files, if this peer has them."""
    cache = peer.code_cache
    if cache is None or not cache.has(msg.code_hash):
        link.post(m.CodeReply(msg.req, msg.code_hash, error=f"{peer.name} does not have it"))
        return
    link.post(m.CodeReply(msg.req, msg.code_hash, cache.bundle(msg.code_hash)))


async def _take(peer: Host, code_hash: str, files: dict[str, bytes], whence: str) -> str:
    """Check, store, vet and load a version; tell the core. Returns why not ("" if in)."""
    if code_hash in peer.state.shipped:
        return ""
    limits = peer.cfg.plugins
    cache = cache_of(peer)

    def load() -> list[Plugin]:
        code.check(files, code_hash, limits.max_shipped_bytes, limits.max_shipped_files)
        directory = cache.store(code_hash, files)
        return code.load(
            directory,
            code_hash,
            limits.import_timeout_s,
            limits.vetter_start_timeout_s,
            limits.vet_memory_mb,
        )

    try:
        found = await peer.compute.offload(load)
    except code.BadBundle as exc:
        log.warning("shipped code %s %s refused: %s", code_hash[:12], whence, exc)
        return f"shipped code {code_hash[:12]}: {exc}"
    except Exception as exc:  # a full disk, a cache removed under us: said, not stranded
        log.error(
            "shipped code %s %s could not be stored or loaded", code_hash[:12], whence, exc_info=exc
        )
        return f"shipped code {code_hash[:12]}: {type(exc).__name__}: {exc}"
    runs = peer.state.runs
    in_use = {
        *(run.info.code_hash for run in runs.active.values()),
        *(run.info.code_hash for run in runs.queue),
        *(info.code_hash for info in runs.queued_elsewhere.values()),
        *peer.state.held,
        *peer.state.fetching,
        code_hash,
    }
    evicted = tuple(cache.evict(in_use))
    plugins = {p.name: p for p in found}
    unmet = {p.name: why for p in found if (why := requirements.unmet(p))}
    log.info("shipped code %s %s: plugins %s", code_hash[:12], whence, ", ".join(sorted(plugins)))
    size = sum(len(data) for data in files.values())
    arrived = CodeArrived(code_hash, plugins, "", evicted, unmet, size)
    peer.apply(handle(peer.state, arrived, peer.now()))
    return ""
