"""The whole configuration: its sections by name, and the defaults of all of them.

The sections are defined (with every default) in the modules beside this one, grouped by the
layer that reads them; this module only names them, so a config file's ``[section]`` tables
and ``satind config show`` follow the field order here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from satind.config.compute import EngineConfig, SharedConfig, StealConfig
from satind.config.runs import (
    AdaptConfig,
    CheckpointConfig,
    FaultToleranceConfig,
    FilesConfig,
    HistoryConfig,
    IterativeConfig,
    RunConfig,
    SpmdConfig,
    TraceConfig,
)
from satind.config.shell import (
    ClientConfig,
    DaemonConfig,
    DashboardConfig,
    LauncherConfig,
    MetricsConfig,
    OwnerConfig,
    PluginsConfig,
)
from satind.config.wire import EmulationConfig, MembershipConfig, NetConfig


@dataclass(frozen=True)
class Config:
    """Every setting of satind: one field per section, named as in a config file's
    ``[section]`` tables and in the order ``satind config show`` prints them."""

    engine: EngineConfig = field(default_factory=EngineConfig)
    steal: StealConfig = field(default_factory=StealConfig)
    net: NetConfig = field(default_factory=NetConfig)
    membership: MembershipConfig = field(default_factory=MembershipConfig)
    ft: FaultToleranceConfig = field(default_factory=FaultToleranceConfig)
    shared: SharedConfig = field(default_factory=SharedConfig)
    iterative: IterativeConfig = field(default_factory=IterativeConfig)
    spmd: SpmdConfig = field(default_factory=SpmdConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    run: RunConfig = field(default_factory=RunConfig)
    files: FilesConfig = field(default_factory=FilesConfig)
    adapt: AdaptConfig = field(default_factory=AdaptConfig)
    plugins: PluginsConfig = field(default_factory=PluginsConfig)
    launcher: LauncherConfig = field(default_factory=LauncherConfig)
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
    owner: OwnerConfig = field(default_factory=OwnerConfig)
    client: ClientConfig = field(default_factory=ClientConfig)
    emulation: EmulationConfig = field(default_factory=EmulationConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    trace: TraceConfig = field(default_factory=TraceConfig)
    history: HistoryConfig = field(default_factory=HistoryConfig)
    dashboard: DashboardConfig = field(default_factory=DashboardConfig)


DEFAULT = Config()
