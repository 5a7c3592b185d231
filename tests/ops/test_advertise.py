"""The address a machine's peers give the members (ops/advertise.py): parsed from
``--advertise``, or found when they listen on every interface. The search itself is checked
where machines have their own addresses: tests/testbed/test_machines.py."""

from __future__ import annotations

import pytest

from satind.net.transport import Address
from satind.ops import advertise


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
def test_unspecified(host: str, everywhere: bool) -> None:
    assert advertise.unspecified(host) is everywhere


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("10.0.0.5", Address("10.0.0.5", 0)),
        ("10.0.0.5:30000", Address("10.0.0.5", 30000)),
        ("node-a.example.org", Address("node-a.example.org", 0)),
        ("node-a.example.org:7420", Address("node-a.example.org", 7420)),
        ("[fd00::5]:7420", Address("fd00::5", 7420)),
        ("[fd00::5]", Address("fd00::5", 0)),
        ("fd00::5", Address("fd00::5", 0)),
    ],
)
def test_parse_advertise(text: str, address: Address) -> None:
    assert advertise.parse_advertise(text) == address


@pytest.mark.parametrize(
    "text", ["", "0.0.0.0", "0.0.0.0:7420", "[::]", "host:port", "host:70000", "[fd00::5]x"]
)
def test_parse_advertise_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="advertised address"):
        advertise.parse_advertise(text)


def test_each_peer_advertises_its_own_port() -> None:
    assert advertise.for_peer(Address("10.0.0.5", 30000), 2) == Address("10.0.0.5", 30002)
    # No port given: each peer gives the port it is bound to.
    assert advertise.for_peer(Address("10.0.0.5", 0), 2) == Address("10.0.0.5", 0)


def test_loopback_and_foreign_addresses_are_never_chosen() -> None:
    """A seed on this machine's loopback gives a loopback route: not advertised. The address
    chosen, whatever this machine has, is one of its own and not loopback."""
    try:
        ip, why = advertise.choose([Address("127.0.0.1", 7420)])
    except advertise.NoAddress as exc:
        assert "--advertise" in str(exc)
        return
    assert not ip.startswith("127.")
    assert advertise.local(ip)
    assert "seed" not in why
    assert not advertise.local("192.0.2.77")  # a documentation address is nobody's
