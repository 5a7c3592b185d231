"""The metrics endpoint's pure parts (families, request handling, the per-peer port rule), the
documented names against the registry of counters, and the responder's bounds on a
loopback socket."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from satind import stats
from satind.config import DEFAULT, MetricsConfig
from satind.core.stealing import RTT_BUCKETS_S, rtt_bucket_names
from satind.node import metrics
from satind.node.http import Endpoint

OPERATIONS = Path(__file__).parent.parent.parent / "docs" / "operations.md"


class _Families:
    def __init__(self, counters: dict[str, float], gauges: dict[str, float]) -> None:
        self.counters, self.gauges = counters, gauges

    def collect(self) -> Any:
        return metrics.families(self.counters, self.gauges, {"peer": "m1/0", "cluster": "east"})


def _registry(counters: dict[str, float], gauges: dict[str, float]) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(counters, gauges))
    return registry


def test_families_parse_with_labels_types_and_values() -> None:
    counters: dict[str, float] = {s.name: i for i, s in enumerate(stats.STATS)}
    counters.update(zip(rtt_bucket_names(), [1] * (len(RTT_BUCKETS_S) + 1), strict=True))
    from prometheus_client.exposition import generate_latest

    text = generate_latest(_registry(counters, {"members_alive": 3})).decode()
    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    jobs = parsed["satind_jobs_run"]  # the parser drops a counter's _total
    assert jobs.type == "counter"
    assert jobs.samples[0].name == "satind_jobs_run_total"
    assert jobs.samples[0].labels == {"peer": "m1/0", "cluster": "east"}
    assert jobs.samples[0].value == counters["jobs_run"]
    assert parsed["satind_orphan_table_size"].type == "gauge"
    assert "satind_progress" not in parsed and "satind_progress_total" not in parsed
    assert parsed["satind_members_alive"].samples[0].value == 3
    rtt = parsed["satind_steal_rtt_seconds"]
    assert rtt.type == "histogram"
    by_name = {(s.name, s.labels.get("le")): s.value for s in rtt.samples}
    assert by_name[("satind_steal_rtt_seconds_bucket", "+Inf")] == len(RTT_BUCKETS_S) + 1
    assert by_name[("satind_steal_rtt_seconds_count", None)] == len(RTT_BUCKETS_S) + 1
    assert ("satind_steal_rtt_seconds_sum", None) in by_name


def test_every_exposed_family_is_documented_and_the_doc_table_matches() -> None:
    from prometheus_client.exposition import generate_latest

    text = generate_latest(_registry({}, {})).decode()
    exposed = {
        s.name
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if not s.name.endswith("_bucket")
    }
    names = {name for name, *_ in metrics.documented()}
    exposed -= {"satind_steal_rtt_seconds_count", "satind_steal_rtt_seconds_sum"}
    assert exposed <= names
    assert {s for s in names if s != "satind_steal_rtt_seconds"} <= exposed
    # Every counter of stats.STATS is there but the per-run ones (progress, peers_computed).
    assert {"progress", "peers_computed"} == metrics.NOT_PER_PEER
    expected = {
        metrics.metric_name(s.name) + ("" if s.name in stats.LEVELS else "_total")
        for s in stats.STATS
        if s.name not in metrics.NOT_PER_PEER
    }
    assert expected <= names
    # Units spelt out, as Prometheus names them: seconds, never _s.
    assert "satind_idle_seconds_total" in names and "satind_idle_s_total" not in names
    # The table in docs/operations.md lists exactly these, with their types.
    doc = OPERATIONS.read_text()
    section = doc[doc.index("## Metrics") :]
    table = dict(re.findall(r"^\| `(satind_\w+)` \| (\w+) \|", section, re.M))
    assert table == {name: kind for name, kind, *_ in metrics.documented()}


@pytest.mark.parametrize(
    ("head", "status", "accept"),
    [
        (b"GET /metrics HTTP/1.1\r\nHost: x", 200, ""),
        (b"GET /metrics?x=1 HTTP/1.0", 200, ""),
        (b"HEAD /metrics HTTP/1.0", 200, ""),
        (b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text", 200, ""),
        (b"GET / HTTP/1.1", 404, ""),
        (b"POST /metrics HTTP/1.1", 404, ""),
        (b"GET /metrics", 400, ""),
        (b"\x00\xff garbage", 400, ""),
        (b"", 400, ""),
    ],
)
def test_respond(head: bytes, status: int, accept: str) -> None:
    got = metrics.respond(head)
    assert got[0] == status
    if b"Accept" in head:
        assert got[1] == "application/openmetrics-text"


def test_each_peer_of_a_machine_gets_its_own_port() -> None:
    on = dataclasses.replace(DEFAULT, metrics=MetricsConfig(enabled=True, port=9500))
    assert metrics.for_peer(on, 0).metrics.port == 9500
    assert metrics.for_peer(on, 3).metrics.port == 9503
    anywhere = dataclasses.replace(DEFAULT, metrics=MetricsConfig(enabled=True, port=0))
    assert metrics.for_peer(anywhere, 3).metrics.port == 0
    assert metrics.for_peer(DEFAULT, 3) is DEFAULT  # off: nothing changes


class _FakeServer(metrics.MetricsServer):
    def __init__(self, cfg: MetricsConfig) -> None:
        self.cfg = cfg
        self.registry = _registry({"jobs_run": 5}, {})
        self.endpoint = Endpoint("metrics", cfg, self.handle)
        self.address = None

        class _Named:
            name = "m1/0"

        self.peer = _Named()  # type: ignore[assignment]


async def _exchange(port: int, data: bytes) -> bytes:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(data)
        out = b""
        try:
            while chunk := await stream.receive_some(65536):
                out += chunk
        except trio.BrokenResourceError:
            pass  # closed with our request unread: a reset
        return out


async def test_server_answers_scrapes_and_closes_garbage_oversized_and_slow_requests() -> None:
    cfg = MetricsConfig(
        enabled=True, port=0, max_request_bytes=256, head_timeout_s=0.5, timeout_s=0.5
    )
    server = _FakeServer(cfg)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            address = await nursery.start(server.run)
            port = address.port
            reply = await _exchange(port, b"GET /metrics HTTP/1.0\r\n\r\n")
            head, _, body = reply.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.0 200 OK")
            assert b"text/plain; version=0.0.4" in head
            families = {f.name: f for f in text_string_to_metric_families(body.decode())}
            assert families["satind_jobs_run"].samples[0].value == 5
            assert (await _exchange(port, b"GET /x HTTP/1.0\r\n\r\n")).startswith(b"HTTP/1.0 404")
            # Oversized: closed unanswered once past the cap, whatever follows.
            assert await _exchange(port, b"GET /metrics HTTP/1.0\r\n" + b"X" * 1000) == b""
            # Garbage without an end: closed unanswered at the deadline.
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                await stream.send_all(b"\x00\x01garbage")
                assert await stream.receive_some(100) == b""
            assert server.endpoint.open == 0
            # Still serving.
            assert (await _exchange(port, b"GET /metrics HTTP/1.0\r\n\r\n")).startswith(
                b"HTTP/1.0 200"
            )
            nursery.cancel_scope.cancel()
