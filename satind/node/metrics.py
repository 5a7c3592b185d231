"""A Prometheus text endpoint per peer: ``GET /metrics`` (``[metrics]``, off by default).

The exposition format is ``prometheus_client``'s: a collector turns the peer's counters into
metric families and ``choose_encoder`` picks the format the scraper asked for (its Accept
header; the text format 0.0.4 by default). What is satind's own is small: which numbers
(``families``: every counter of ``stats.STATS`` as ``satind_NAME_total``, levels as gauges,
a few gauges of the peer), and a minimal HTTP/1.0 responder on trio, because
``prometheus_client``'s own servers run in a thread and would read the peer's state from it
while the trio thread changes it. Here the collector runs on the trio thread, between two
messages, like ``satind status``.

One connection costs at most ``max_request_bytes`` of request within ``head_timeout_s``,
``timeout_s`` for its answer to be taken and one answer (a few kilobytes); at most
``max_connections`` are served at once (node/http.py: past it, a new connection closes the
oldest that has not sent its request yet). Anything that is not a whole request head within
those bounds is closed without an answer; a request for another path gets 404, a collector
that fails a 500.

Host ``i`` of a machine serves on ``metrics.port + i`` (as peers listen on ``daemon.port + i``);
``port`` 0 gives each peer any free port. The peer reports the address it bound (the daemon
logs it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import trio
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

import satind.stats as stats
from satind.config import MetricsConfig, for_peer

__all__ = ["for_peer"]  # where it lived; the config is its home now
from satind.core.stealing import RTT_BUCKETS_S, RTT_SUM, rtt_bucket_names
from satind.net.transport import Address
from satind.node.host import Host
from satind.node.http import REASONS, TEXT, Endpoint, Exchange

log = logging.getLogger(__name__)

PREFIX = "satind_"
# Counters of stats.STATS that a peer does not expose: a run's progress is a fraction of one
# run's tree, meaningless summed over a peer's runs; peers_computed counts peers in a run's
# total, and is 1 or 0 in a peer's share.
NOT_PER_PEER: frozenset[str] = frozenset({"progress", "peers_computed"})
# The peer's gauges besides stats.LEVELS: name (without the prefix), help.
GAUGES: tuple[tuple[str, str], ...] = (
    ("members_alive", "members this peer sees alive (itself included)"),
    ("runs_active", "runs this peer takes part in now"),
    ("runs_mastered", "runs this peer is the master of now (running)"),
    ("runs_queued", "runs this peer masters that wait for a slot (run.max_concurrent)"),
    ("queue_length", "jobs in this peer's work queue"),
    ("draining", "1 while this peer drains"),
)
HISTOGRAM = "steal_rtt_seconds"
# Runs this peer ended as their master, by how (core/master.py counts them): what to alert on.
RUN_ENDS: tuple[tuple[str, str], ...] = (
    ("runs_done", "runs this peer mastered that ended done"),
    ("runs_failed", "runs this peer mastered that failed"),
    ("runs_cancelled", "runs this peer mastered that were cancelled"),
)


def metric_name(name: str) -> str:
    """A statistic's name as Prometheus wants it: the base unit spelt out (``idle_s`` ->
    ``idle_seconds``; the run JSON keeps the short names)."""
    return PREFIX + (name[:-2] + "_seconds" if name.endswith("_s") else name)


def documented() -> list[tuple[str, str, str, str]]:
    """Every satind metric a peer exposes: (name as scraped, type, unit, help). The table in
    docs/operations.md lists the same (a test compares them)."""
    out = []
    for stat in stats.STATS:
        if stat.name in NOT_PER_PEER:
            continue
        if stat.name in stats.LEVELS:
            out.append((metric_name(stat.name), "gauge", stat.unit, stat.what))
        else:
            out.append((metric_name(stat.name) + "_total", "counter", stat.unit, stat.what))
    out += [(PREFIX + name, "gauge", "", what) for name, what in GAUGES]
    out.append((PREFIX + HISTOGRAM, "histogram", "seconds", "steal round trips (thief side)"))
    out += [(PREFIX + name + "_total", "counter", "runs", what) for name, what in RUN_ENDS]
    return out


def families(
    peer_counters: dict[str, float], gauges: dict[str, float], labels: dict[str, str]
) -> Iterator[Metric]:
    """The metric families of one peer from its counters (``PeerState.peer_counters`` plus
    its runs' counters, by stats.STATS names) and gauges (``GAUGES`` names), each with
    ``labels``: a pure function (tests/node/test_metrics.py)."""
    names, values = list(labels), list(labels.values())
    for stat in stats.STATS:
        if stat.name in NOT_PER_PEER:
            continue
        value = float(peer_counters.get(stat.name, 0))
        metric: Metric
        if stat.name in stats.LEVELS:
            metric = GaugeMetricFamily(
                metric_name(stat.name), f"{stat.what} ({stat.unit})", labels=names
            )
        else:
            metric = CounterMetricFamily(
                metric_name(stat.name), f"{stat.what} ({stat.unit})", labels=names
            )
        metric.add_metric(values, value)
        yield metric
    for name, what in GAUGES:
        gauge = GaugeMetricFamily(PREFIX + name, what, labels=names)
        gauge.add_metric(values, float(gauges.get(name, 0)))
        yield gauge
    # The steal round-trip histogram: StealCounters keeps counts per bucket (not cumulative)
    # and their sum; the family has cumulative buckets, _count and _sum.
    hist = [float(peer_counters[k]) for k in rtt_bucket_names() if k in peer_counters]
    if len(hist) == len(RTT_BUCKETS_S) + 1:
        buckets, seen = [], 0.0
        for bound, count in zip([*map(str, RTT_BUCKETS_S), "+Inf"], hist, strict=True):
            seen += count
            buckets.append((bound, seen))
        family = HistogramMetricFamily(
            PREFIX + HISTOGRAM, "steal round trips (thief side)", labels=names
        )
        family.add_metric(values, buckets, float(peer_counters.get(RTT_SUM, 0.0)))
        yield family
    for name, what in RUN_ENDS:
        ended = CounterMetricFamily(PREFIX + name, what, labels=names)
        ended.add_metric(values, float(peer_counters.get(name, 0)))
        yield ended


class PeerCollector(Collector):
    """Reads the peer's state when scraped (on the trio thread)."""

    def __init__(self, peer: Host) -> None:
        self.peer = peer

    def collect(self) -> Iterator[Metric]:
        peer = self.peer
        state = peer.state
        counters = state.peer_counters()
        counters.update(state.runs.lifetime_counters())
        counters.update(state.runs.ends)
        gauges = {
            "members_alive": len(state.table.alive()),
            "runs_active": len(state.runs.active),
            "runs_mastered": len(state.runs.mastered_by(peer.name)),
            "runs_queued": len(state.runs.queue),
            "queue_length": len(state.queue),
            "draining": 1.0 if state.draining else 0.0,
        }
        yield from families(counters, gauges, {"peer": peer.name, "cluster": state.cluster})


def registry_of(peer: Host) -> CollectorRegistry:
    """The peer's metrics, and the process's own (CPU, RSS, open files: prometheus_client's
    ProcessCollector, Linux only; one peer is one process)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PeerCollector(peer))
    ProcessCollector(registry=registry)
    return registry


def respond(head: bytes) -> tuple[int, str]:
    """What to answer a request head (request line and headers, without the blank line):
    (status, Accept header). A pure function (tests/node/test_metrics.py)."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
        return 400, ""
    method, target, _ = parts
    accept = ""
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"accept":
            accept = value.strip().decode("latin-1")
    if method not in (b"GET", b"HEAD") or target.split(b"?")[0] != b"/metrics":
        return 404, ""
    return 200, accept


class MetricsServer:
    """The endpoint of one peer: ``run`` is a service of the peer's nursery."""

    def __init__(self, peer: Host, cfg: MetricsConfig) -> None:
        self.peer = peer
        self.cfg = cfg
        self.registry = registry_of(peer)
        self.endpoint = Endpoint("metrics", cfg, self.handle)
        self.address: Address | None = None

    async def run(
        self, *, task_status: trio.TaskStatus[Address] = trio.TASK_STATUS_IGNORED
    ) -> None:
        cfg = self.cfg
        try:
            listeners = await trio.open_tcp_listeners(cfg.port, host=cfg.host)
        except OSError as exc:
            raise OSError(
                exc.errno, f"cannot serve metrics on {cfg.host}:{cfg.port}: {exc}"
            ) from None
        host, port = listeners[0].socket.getsockname()[:2]
        self.address = Address(host, port)
        log.info("%s serves metrics on http://%s/metrics", self.peer.name, self.address)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.endpoint.serve, listeners)
            task_status.started(self.address)

    async def handle(self, head: bytes, exchange: Exchange) -> None:
        """One scrape. A collector that raises is a 500 (node/http.py), never the peer's end."""
        status, accept = respond(head)
        if status == 200:
            encoder, content_type = choose_encoder(accept)
            body = encoder(self.registry)
        else:
            content_type, body = TEXT, f"{REASONS[status]}\n".encode()
        await exchange.answer(status, content_type, body, head.startswith(b"HEAD "))
