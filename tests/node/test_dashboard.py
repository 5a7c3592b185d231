"""The dashboard's pure parts (node/dashboard.py): who it may serve, and reading a request.
The endpoint itself is tested in a real browser (tests/integration/test_dashboard_browser.py)."""

from __future__ import annotations

from satind.config import DashboardConfig
from satind.node.dashboard import page, parse_request, refusal


def test_it_serves_loopback_freely_and_elsewhere_only_with_tls_or_a_token() -> None:
    assert refusal(DashboardConfig(), has_credentials=False) == ""
    assert refusal(DashboardConfig(host="::1"), has_credentials=False) == ""
    why = refusal(DashboardConfig(host="0.0.0.0"), has_credentials=True)
    assert "neither TLS nor a token" in why and "SSH tunnel" in why
    assert refusal(DashboardConfig(host="0.0.0.0", token="t"), has_credentials=False) == ""
    assert refusal(DashboardConfig(host="10.1.2.3", tls=True), has_credentials=True) == ""
    assert "needs the peer's certificate" in refusal(
        DashboardConfig(tls=True), has_credentials=False
    )


def test_a_request_head_is_read_into_method_path_query_and_cookies() -> None:
    head = (
        b"GET /api/run/2026%2Dx?token=abc&x=1 HTTP/1.1\r\nHost: h\r\n"
        b"Cookie: a=1; satind_dashboard=tok"
    )
    assert parse_request(head) == (
        "GET",
        "/api/run/2026-x",
        {"token": "abc", "x": "1"},
        {"a": "1", "satind_dashboard": "tok"},
    )
    assert parse_request(b"garbage") is None
    assert parse_request(b"GET / FTP/1.0") is None


def test_the_page_is_packaged_and_loads_nothing_from_elsewhere() -> None:
    html = page().decode()
    assert html.startswith("<!doctype html>") and 'EventSource("/api/events")' in html
    assert "<script src" not in html and "<link" not in html


def test_the_coordinators_decisions_come_from_every_peers_line_newest_last() -> None:
    from satind.node.dashboard import DashboardServer

    def decision(at: float, run: str) -> dict[str, object]:
        return {"at": at, "run_id": run, "peers": 3, "efficiency": 0.2, "action": "wait", "why": ""}

    snap = {
        "peers": [
            {"slot": "a/0", "decisions": [decision(3.0, "r1"), decision(5.0, "r1")]},
            {"slot": "b/0", "decisions": [decision(4.0, "r2")]},
            {"slot": "c/0", "decisions": []},
        ]
    }
    made = DashboardServer._decisions(snap)
    assert [(d["peer"], d["at"]) for d in made] == [("a/0", 3.0), ("b/0", 4.0), ("a/0", 5.0)]
