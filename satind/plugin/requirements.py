"""What a plugin needs of the machine that runs it (``Plugin.requires``: PEP 508 requirement
strings such as ``"numpy>=1.26"``), checked against the distributions installed where the
peer runs. A peer whose environment lacks one takes no part in the plugin's runs and says why
(docs/plugins.md, "What a run needs of a peer"): its gossip lists the plugin as unmet
(``UNMET``), the master leaves it out, and its thief asks for none of those runs' jobs.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Mapping

from satind.descriptor import UNMET, Plugin


@functools.lru_cache(maxsize=256)
def _unmet(requires: tuple[str, ...]) -> str:
    # Imported here: few plugins state requirements, and it costs every peer's start ~25 ms.
    from packaging.requirements import Requirement

    missing = []
    for text in requires:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue  # not for this platform or Python
        try:
            have = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(f"{text} (not installed)")
            continue
        if req.specifier and not req.specifier.contains(have, prereleases=True):
            missing.append(f"{text} (has {have})")
    return ", ".join(missing)


def unmet(plugin: Plugin) -> str:
    """Which of the plugin's requirements this environment lacks, in words ("" for none)."""
    return _unmet(tuple(plugin.requires)) if plugin.requires else ""


def gossiped(plugins: Mapping[str, Plugin]) -> dict[str, str]:
    """What a member gossips of its plugins: each one's code hash, or why it cannot serve it."""
    return {p.name: (UNMET + why if (why := unmet(p)) else p.code_hash) for p in plugins.values()}


def unmet_here(plugins: Mapping[str, Plugin]) -> dict[tuple[str, str], str]:
    """(name, code hash) -> why, for the plugins this peer cannot serve (PeerState.unmet)."""
    return {(p.name, p.code_hash): why for p in plugins.values() if (why := unmet(p))}
