"""satind: divide-and-conquer Python programs over peers that come, go and crash.

Plugin authors import from here only::

    from satind import Plugin, UsageError, abort, spawnable, sync

Clients too (docs/client.md)::

    with satind.connect("node-a:7420", keys="~/.satind/keys") as cluster:
        print(cluster.submit("nqueens", "12").result())
"""

from typing import Any

# First: it refuses a stale compiled module before one is imported (satind/_native.py).
from satind import _native as _native
from satind.api import Handle as Handle
from satind.api import Spawnable as Spawnable
from satind.api import abort as abort
from satind.api import count as count
from satind.api import pause_point as pause_point
from satind.api import spawnable as spawnable
from satind.api import sync as sync
from satind.files import input_file as input_file
from satind.files import output_file as output_file
from satind.iterative import iterative_plugin as iterative_plugin
from satind.net.codec import register_type as register_type
from satind.plugin import CheckFailed as CheckFailed
from satind.plugin import NotChecked as NotChecked
from satind.plugin import Plugin as Plugin
from satind.plugin import PluginFailed as PluginFailed
from satind.plugin import UsageError as UsageError
from satind.shared import SharedObject as SharedObject
from satind.shared import global_method as global_method
from satind.spmd import spmd_plugin as spmd_plugin
from satind.work.errors import JobAborted as JobAborted
from satind.work.errors import LimitExceeded as LimitExceeded
from satind.work.errors import RemoteJobError as RemoteJobError
from satind.work.errors import ResultNotReady as ResultNotReady

__version__ = "0.1.0"

# The client API, imported when first used (PEP 562): a peer, a plugin or the compute thread
# that imports satind does not pay for the client's modules, and no layer below the client
# depends on it through this package. (Typed, for mypy: ``from satind.client.sync import
# connect`` and the like.)
_CLIENT = {
    "connect": "satind.client.sync",
    "run_local": "satind.client.sync",
    "open_cluster": "satind.client.api",
    "run_local_async": "satind.client.local",
    "Cluster": "satind.client.api",
    "Run": "satind.client.api",
    "Outcome": "satind.client.api",
    "Executor": "satind.client.executor",
    "as_completed": "satind.client.futures",
    "wait": "satind.client.futures",
    "FIRST_COMPLETED": "satind.client.futures",
    "FIRST_EXCEPTION": "satind.client.futures",
    "ALL_COMPLETED": "satind.client.futures",
    "SatindError": "satind.client.errors",
    "Refused": "satind.client.errors",
    "BadArguments": "satind.client.errors",
    "NoSuchPlugin": "satind.client.errors",
    "NotAllowed": "satind.client.errors",
    "VersionMismatch": "satind.client.errors",
    "PeerUnavailable": "satind.client.errors",
    "Timeout": "satind.client.errors",
    "RunCancelled": "satind.client.errors",
    "RunSuspended": "satind.client.errors",
    "RunLost": "satind.client.errors",
    "RunFailed": "satind.client.errors",
}


def __getattr__(name: str) -> Any:
    module = _CLIENT.get(name)
    if module is None:
        raise AttributeError(f"module 'satind' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
