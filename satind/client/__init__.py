"""The client side of satind: the Python API (``api``: async, trio; ``sync``: for scripts and
notebooks; ``errors``), and the connection and files they are made of. docs/client.md is
the guide. ``satind.connect`` and the rest are these names, imported when first used."""

from satind.client.api import Cluster as Cluster
from satind.client.api import Outcome as Outcome
from satind.client.api import PeerInfo as PeerInfo
from satind.client.api import Run as Run
from satind.client.api import RunInfo as RunInfo
from satind.client.api import open_cluster as open_cluster
from satind.client.api import run_local_async as run_local_async
from satind.client.errors import BadArguments as BadArguments
from satind.client.errors import NoSuchPlugin as NoSuchPlugin
from satind.client.errors import NotAllowed as NotAllowed
from satind.client.errors import PeerUnavailable as PeerUnavailable
from satind.client.errors import Refused as Refused
from satind.client.errors import RunCancelled as RunCancelled
from satind.client.errors import RunFailed as RunFailed
from satind.client.errors import RunLost as RunLost
from satind.client.errors import RunSuspended as RunSuspended
from satind.client.errors import SatindError as SatindError
from satind.client.errors import Timeout as Timeout
from satind.client.sync import SyncCluster as SyncCluster
from satind.client.sync import SyncRun as SyncRun
from satind.client.sync import connect as connect
from satind.client.sync import run_local as run_local
