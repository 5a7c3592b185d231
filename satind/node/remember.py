"""The members a peer last saw alive, kept in its machine's state directory so that after a
restart it can find the system again without seeds of its own (Serf's snapshot; what
memberlist's users keep as a peers file). membership/rejoin.py says how they are used.

Each peer of a machine writes its own file, ``members-NODE-INDEX.json`` (atomically: a
temporary file renamed over it), at most every ``membership.remember_interval_s`` and only
when its member table changed; a restarted peer reads the files of every peer of its machine
(any of them may have seen the system last). A file that cannot be read is ignored with a
WARNING: it only costs the rejoin a chance.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from satind.net.names import slot_of
from satind.net.transport import Address, parse_address

if TYPE_CHECKING:
    from satind.node.host import Host

log = logging.getLogger(__name__)

# Most addresses kept in one file (a machine does not need all of a large system's to
# find it again, and a file read at start must stay small).
MAX_REMEMBERED = 256


def file_of(directory: Path, slot: str) -> Path:
    """The file of the peer in ``slot`` (``m1/0`` -> ``members-m1-0.json``)."""
    node, _, index = slot_of(slot).partition("/")
    return directory / f"members-{node}-{index}.json"


def remembered(directory: Path, slot: str) -> list[Address]:
    """The addresses the peers of ``slot``'s machine remembered, each once."""
    node = slot_of(slot).partition("/")[0]
    pattern = re.compile(rf"members-{re.escape(node)}-\d+\.json")
    found: list[Address] = []
    try:
        files = sorted(p for p in directory.iterdir() if pattern.fullmatch(p.name))
    except OSError:
        return []
    for path in files:
        try:
            data = json.loads(path.read_text())
            addresses = [parse_address(str(a)) for a in data["members"].values()]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("ignoring %s: not a members file satind wrote (%s)", path, exc)
            continue
        found += [a for a in addresses if a not in found]
    return found


def save(directory: Path, slot: str, members: dict[str, str]) -> None:
    """Write ``members`` (member name -> "HOST:PORT") as ``slot``'s file, atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    path = file_of(directory, slot)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"slot": slot, "members": members}, indent=0))
    os.replace(temporary, path)


async def remember_loop(peer: Host, directory: Path) -> None:
    """Keep ``peer``'s file up to date with the members it sees alive."""
    every = peer.cfg.membership.remember_interval_s
    written = -1
    while True:
        table = peer.table
        if table.version != written:
            members = {m.name: str(m.address) for m in table.alive() if m.name != peer.name}
            if members:
                chosen = dict(sorted(members.items())[:MAX_REMEMBERED])
                try:
                    await trio.to_thread.run_sync(save, directory, peer.name, chosen)
                    written = table.version
                except OSError as exc:
                    log.warning("cannot remember the members in %s: %s", directory, exc)
        await trio.sleep(every)
