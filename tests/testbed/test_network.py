"""The testbed's network (satind/testbed/network.py): each machine a namespace with its own
address; cuts (both ways, one way), heals and throttles act on the links between them, never
on the host's."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from satind.testbed import network as net
from satind.testbed.machines import ENTER

SERVER = """
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 9000)); s.listen(16); print("up", flush=True)
while True:
    c, _ = s.accept()
    c.settimeout(30)
    try:
        while c.recv(1 << 16):  # all the client sends, then one byte back
            pass
        c.sendall(b"k")
    except OSError:
        pass  # a client the test cut off: the next one
    c.close()
"""

CLIENT = """
import socket, sys, time
size = int(sys.argv[2])
try:
    c = socket.create_connection((sys.argv[1], 9000), timeout=1.5)
    c.settimeout(20)
    began = time.monotonic()
    c.sendall(b"x" * size); c.shutdown(socket.SHUT_WR); c.recv(1)
    print(f"ok {time.monotonic() - began:.3f}")
except OSError as exc:
    print("fail", type(exc).__name__)
"""


@pytest.fixture(scope="module")
def lan() -> Iterator[net.Network]:
    why = net.unavailable()
    if why:
        pytest.skip(f"no testbed here: {why}")
    network = net.Network.create(["a", "b", "c"])
    servers = [
        subprocess.Popen(
            [sys.executable, str(ENTER), network.netns(m), "--", sys.executable, "-c", SERVER],
            stdout=subprocess.PIPE,
            text=True,
        )
        for m in network.machines
    ]
    try:
        for server in servers:
            assert server.stdout is not None and server.stdout.readline().strip() == "up"
        yield network
    finally:
        for server in servers:
            server.kill()
            server.wait()
        network.destroy()


def reach(network: net.Network, src: str, dst: str, size: int = 1) -> str:
    """ "ok SECONDS" when ``src`` reaches ``dst``'s server, else "fail ERROR"."""
    done = subprocess.run(
        [
            sys.executable,
            str(ENTER),
            network.netns(src),
            "--",
            sys.executable,
            "-c",
            CLIENT,
            network.ip(dst),
            str(size),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.stdout.strip()


def test_each_machine_has_its_own_address_and_reaches_the_others(lan: net.Network) -> None:
    assert len({lan.ip(m) for m in lan.machines}) == 3
    for src in lan.machines:
        for dst in lan.machines:
            assert reach(lan, src, dst).startswith("ok")
    # The host reaches every machine too (clients run there), and only its own testbed's.
    with socket.create_connection((lan.ip("a"), 9000), timeout=2):
        pass
    assert lan.ip("a").startswith(f"{lan.net}.{lan.index}.")


def test_a_cut_drops_both_ways_and_a_heal_restores(lan: net.Network) -> None:
    lan.cut(["a"], ["b"])
    try:
        assert reach(lan, "a", "b") == "fail TimeoutError"  # silent, as a pulled cable
        assert reach(lan, "b", "a") == "fail TimeoutError"
        assert reach(lan, "a", "c").startswith("ok")  # only the cut link
        assert lan.shaped() == {"a": {"b": "cut"}, "b": {"a": "cut"}}
    finally:
        lan.heal()
    assert reach(lan, "a", "b").startswith("ok") and reach(lan, "b", "a").startswith("ok")
    assert lan.shaped() == {}


def test_a_one_way_cut_drops_only_one_direction(lan: net.Network) -> None:
    """a's packets to b are dropped; b's reach a. Over TCP no connection opens either way
    (b's SYN arrives, a's answer does not), but a hears what b sends."""
    lan.cut(["a"], ["b"], both=False)
    try:
        assert lan.shaped() == {"a": {"b": "cut"}}
        assert reach(lan, "a", "b") == "fail TimeoutError"
        assert reach(lan, "b", "a") == "fail TimeoutError"
        assert reach(lan, "c", "a").startswith("ok")
    finally:
        lan.heal()


def test_a_throttle_limits_the_rate_of_one_link(lan: net.Network) -> None:
    size = 400_000  # bytes: 3.2 Mbit, 1.6 s at 2 Mbit/s, milliseconds unthrottled
    fast = float(reach(lan, "a", "b", size).split()[1])
    lan.throttle(["a"], ["b"], 2_000_000)
    try:
        slow = float(reach(lan, "a", "b", size).split()[1])
        other = float(reach(lan, "a", "c", size).split()[1])
    finally:
        lan.heal()
    assert slow > 1.0 > fast and other < 0.5, (fast, slow, other)


def test_destroy_leaves_nothing() -> None:
    if net.unavailable():
        pytest.skip(net.unavailable())
    network = net.Network.create(["x"])
    name, bridge = network.netns("x"), network.bridge
    network.destroy()
    assert not Path(f"/run/netns/{name}").exists()
    assert bridge not in {n for _, n in socket.if_nameindex()}
