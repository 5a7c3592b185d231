"""The dashboard's pure parts (node/dashboard.py, node/dashboard_views.py): who it may serve,
reading a request, the page's content policy, the token's cookie and redirect, run ids, who
reads what. The endpoint itself is attacked in tests/security/test_http_fuzz.py and tested in
a real browser (tests/integration/test_dashboard_browser.py)."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest

from satind.config import DashboardConfig
from satind.net import tls
from satind.node import dashboard
from satind.node.dashboard import (
    RUN_ID,
    content_policy,
    page,
    refusal,
    session_value,
    without_token,
)
from satind.node.dashboard_views import EVERYTHING, Reader, decisions, reader_of
from satind.node.host import new_run_id
from satind.node.http import Request, parse_request


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


def test_a_request_head_is_read_into_method_path_query_headers_and_cookies() -> None:
    head = (
        b"GET /api/run/2026%2Dx?token=abc&x=1 HTTP/1.1\r\nHost: h\r\n"
        b"Cookie: a=1; satind_dashboard=tok\r\nAuthorization: Bearer t"
    )
    assert parse_request(head) == Request(
        "GET",
        "/api/run/2026-x",
        {"token": "abc", "x": "1"},
        {"host": "h", "cookie": "a=1; satind_dashboard=tok", "authorization": "Bearer t"},
        {"a": "1", "satind_dashboard": "tok"},
    )


@pytest.mark.parametrize(
    "head",
    [
        b"garbage",
        b"GET / FTP/1.0",
        b"GET  HTTP/1.0",
        b"GET http://elsewhere/ HTTP/1.0",  # only origin-form targets
        b"GET /%FF%FE HTTP/1.0",  # not UTF-8 once decoded
        b"GET /%C4 HTTP/1.0",  # a UTF-8 sequence cut short
        b"GET /a%0d%0aSet-Cookie:%20x=1 HTTP/1.0",  # a line break
        b"GET /a%00b HTTP/1.0",
    ],
)
def test_a_request_that_is_not_one_a_peer_serves_is_none(head: bytes) -> None:
    assert parse_request(head) is None


def test_a_path_is_decoded_once_so_an_encoded_percent_stays_a_percent() -> None:
    request = parse_request(b"GET /api/run/%252e.. HTTP/1.0")
    assert request is not None and request.path == "/api/run/%2e.."
    assert not RUN_ID.fullmatch(request.path.split("/")[3])
    decoded = parse_request(b"GET /api/run/%C4%80 HTTP/1.0")  # valid UTF-8: U+0100
    assert decoded is not None and decoded.path == "/api/run/\u0100"


def test_run_ids_are_what_peers_make_and_nothing_that_could_break_a_header() -> None:
    for good in (new_run_id(), "sim-3-12", "run-0", "a" * 100):
        assert RUN_ID.fullmatch(good), good
    for bad in ("", "..", ".x", "a" * 101, "x\r\nSet-Cookie: a=1", 'x"y', "\u0100", "a/b", "%2e"):
        assert not RUN_ID.fullmatch(bad), bad


def test_the_page_is_packaged_and_loads_nothing_from_elsewhere() -> None:
    html = page().decode()
    assert html.startswith("<!doctype html>") and 'EventSource("/api/events")' in html
    assert "<script src" not in html and "<link" not in html
    # No inline handler (onclick=...) nor style attribute: the content policy blocks them.
    markup = re.sub(r"<(script|style)>.*?</\1>", "", html, flags=re.S)
    assert not re.search(r"<[^>]*\s(on\w+|style)=", markup)


def test_the_content_policy_allows_the_pages_own_script_and_style_by_hash_only() -> None:
    html = page()
    policy = content_policy(html)
    assert "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
    assert policy.startswith("default-src 'self'")
    script = re.search(rb"<script>(.*?)</script>", html, re.S)
    assert script is not None
    digest = base64.b64encode(hashlib.sha256(script.group(1)).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy
    with pytest.raises(ValueError):
        content_policy(b"<style></style><script>a</script><script>b</script>")


def test_the_cookie_is_derived_from_the_token_and_is_not_it() -> None:
    value = session_value("k3y")
    assert value != "k3y" and "k3y" not in value and len(value) == 64
    assert value == session_value("k3y") != session_value("k3z")


def test_the_redirect_drops_the_token_and_keeps_the_rest() -> None:
    def where(target: bytes) -> str:
        request = parse_request(b"GET " + target + b" HTTP/1.0")
        assert request is not None
        return without_token(request)

    assert where(b"/?token=abc") == "/"
    assert where(b"/api/status?x=1&token=abc") == "/api/status?x=1"
    assert where(b"/%C4%80?token=a") == "/%C4%80"  # never a raw character in Location


def test_who_reads_is_the_certificate_behind_tls_and_everyone_without() -> None:
    assert reader_of(None) == EVERYTHING and tls.GRANT_OPERATE in EVERYTHING.grants

    def cert(name: str, *units: str) -> dict[str, object]:
        subject = (
            (("commonName", name),),
            *((("organizationalUnitName", u),) for u in units),
        )
        return {"subject": subject}

    assert reader_of(cert("bob", "client", "may:submit")) == Reader("bob", frozenset({"submit"}))
    assert reader_of(cert("m1", "peer")) == Reader("m1")  # a member's: as a member
    assert reader_of(cert("x")).grants == frozenset()  # neither: nothing
    assert reader_of({"subject": ()}).grants == frozenset()  # no name: nothing


def test_the_coordinators_decisions_come_from_every_peers_line_newest_last() -> None:
    def decision(at: float, run: str) -> dict[str, object]:
        return {"at": at, "run_id": run, "peers": 3, "efficiency": 0.2, "action": "wait", "why": ""}

    snap = {
        "peers": [
            {"slot": "a/0", "decisions": [decision(3.0, "r1"), decision(5.0, "r1")]},
            {"slot": "b/0", "decisions": [decision(4.0, "r2")]},
            {"slot": "c/0", "decisions": []},
        ]
    }
    made = decisions(snap)
    assert [(d["peer"], d["at"]) for d in made] == [("a/0", 3.0), ("b/0", 4.0), ("a/0", 5.0)]


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("", True),  # HTTP/1.0 without Host
        ("127.0.0.1:8420", True),
        ("127.0.0.1", True),
        ("[::1]:8420", True),
        ("10.231.1.1:8420", True),
        ("localhost:8420", True),
        ("LOCALHOST", True),
        ("dash.example.org", True),  # in allowed_hosts
        ("evil.example.com:8420", False),  # a page that rebound its name to 127.0.0.1
        ("127.0.0.1.evil.example.com", False),
    ],
)
def test_a_request_for_another_host_name_is_refused_against_dns_rebinding(
    host: str, allowed: bool
) -> None:
    cfg = DashboardConfig(allowed_hosts=["dash.example.org"])
    assert dashboard.host_allowed(host, cfg) is allowed
