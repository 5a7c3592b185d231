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
