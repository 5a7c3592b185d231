"""Every setting of satind, its default, its unit and why.

Each default lives in exactly one place: the field of its section's dataclass, with a comment
giving its unit and its trade-off. Code reads ``cfg.section.name``; docs point here instead of
restating numbers (restated defaults drift). Presets are built by overriding
(``dataclasses.replace``), in the manner of memberlist's DefaultLANConfig/DefaultWANConfig.

The sections are grouped by the layer that reads them, one module per group: together, with
the comments that say why, they are too long for one module, and a reader looking for a
setting knows which layer uses it.

* ``compute``: the engine of a peer, stealing, shared objects;
* ``wire``: framing, caps and budgets of the wire, membership, wide-area emulation;
* ``runs``: recovery, iterative and SPMD runs, checkpoints, the run lifecycle, files,
  self-adaptivity, traces;
* ``shell``: plugin loading, the launcher, the daemon, clients, the metrics endpoint;
* ``root``: ``Config``, the sections by name, and ``DEFAULT``.

``loading`` holds no default: it reads config files, applies overrides and flags (checked) and
prints the effective configuration. Import every name from ``satind.config``.
"""

from __future__ import annotations

from satind.config.compute import EngineConfig as EngineConfig
from satind.config.compute import SharedConfig as SharedConfig
from satind.config.compute import StealAlgorithm as StealAlgorithm
from satind.config.compute import StealConfig as StealConfig
from satind.config.loading import CHOICES as CHOICES
from satind.config.loading import ConfigError as ConfigError
from satind.config.loading import apply_flags as apply_flags
from satind.config.loading import for_peer as for_peer
from satind.config.loading import load as load
from satind.config.loading import to_toml as to_toml
from satind.config.loading import with_overrides as with_overrides
from satind.config.root import DEFAULT as DEFAULT
from satind.config.root import Config as Config
from satind.config.runs import AdaptConfig as AdaptConfig
from satind.config.runs import CheckpointConfig as CheckpointConfig
from satind.config.runs import CheckpointPolicy as CheckpointPolicy
from satind.config.runs import FaultToleranceConfig as FaultToleranceConfig
from satind.config.runs import FilesConfig as FilesConfig
from satind.config.runs import HistoryConfig as HistoryConfig
from satind.config.runs import IterativeConfig as IterativeConfig
from satind.config.runs import RunConfig as RunConfig
from satind.config.runs import SpmdConfig as SpmdConfig
from satind.config.runs import TraceConfig as TraceConfig
from satind.config.shell import ClientConfig as ClientConfig
from satind.config.shell import DaemonConfig as DaemonConfig
from satind.config.shell import DashboardConfig as DashboardConfig
from satind.config.shell import LauncherConfig as LauncherConfig
from satind.config.shell import MetricsConfig as MetricsConfig
from satind.config.shell import OnSigterm as OnSigterm
from satind.config.shell import OwnerConfig as OwnerConfig
from satind.config.shell import PluginsConfig as PluginsConfig
from satind.config.shell import default_peer_count as default_peer_count
from satind.config.wire import EmulationConfig as EmulationConfig
from satind.config.wire import MembershipConfig as MembershipConfig
from satind.config.wire import NetConfig as NetConfig
