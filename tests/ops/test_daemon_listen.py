"""A daemon whose peers listen on every interface warns: that address is what they give the
other members (ops/daemon.py)."""

from __future__ import annotations

import pytest

from satind.ops.daemon import listens_everywhere


@pytest.mark.parametrize(
    ("host", "everywhere"),
    [
        ("0.0.0.0", True),
        ("::", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("node-a.example.org", False),
    ],
)
def test_listens_everywhere(host: str, everywhere: bool) -> None:
    assert listens_everywhere(host) is everywhere
