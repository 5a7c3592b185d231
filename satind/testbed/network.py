"""The testbed's network: one Linux network namespace per machine, each with its own IPv4
address on a bridge and its own loopback, built over netlink with pyroute2.

```
 host namespace: bridge stbK  10.231.K.254/24  (the test's clients dial the machines from here)
      |-- veth stbKm1 <-> eth0 in namespace stbK-m1   10.231.K.1/24, lo 127.0.0.1
      |-- veth stbKm2 <-> eth0 in namespace stbK-m2   10.231.K.2/24, lo 127.0.0.1
      ...
```

K is the first index no other testbed of this host holds (chosen under a lock file), so two
test workers can each have a testbed. Nothing routes out of the subnet: a machine has no
default route, so only the testbed's own addresses can ever be dialled.

**Links.** Each machine's egress (its ``eth0``) has an HTB root qdisc: class ``1:1`` carries
everything by default, unlimited; a u32 filter per shaped destination sends that
destination's packets to a class of their own, which either drops them all (a leaf ``pfifo``
of limit 0: a cut, silent as a pulled cable, with no ICMP error for the sender to notice) or
limits their rate (a throttle: HTB's own token bucket). ``cut(a, b)`` shapes both ways;
``cut(a, b, both=False)`` only a's packets to b — over TCP that cuts new connections both
ways (b's SYN arrives, a's answer does not), while a connection already open keeps carrying
b's data to a until b's retransmissions give up: "a hears b, b does not hear a". Why not
``tc ... action drop``: this kernel has no ``act_gact``; nor netem (latency comes from the
transport's wide-area emulation, ``[net] emulate``), nor iptables.

Every change rebuilds the machine's egress tree from the testbed's record of what is cut and
throttled (a few netlink calls): the record, not the kernel, is the truth, and ``heal``
simply forgets.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import ipaddress
import os
import socket
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The testbed's /16: 10.231.K.0/24 for testbed K. Override with SATIND_TESTBED_NET (a /16
# prefix such as "10.77") where 10.231 is in use.
DEFAULT_NET = "10.231"
# Where testbeds take their index, under a lock (root's runtime directory).
LOCK_DIR = Path("/run/satind-testbed")
# The host's own address on each testbed's bridge (.254): clients on the host dial from it.
HOST_OCTET = 254
# bit/s. An unshaped link's rate (the HTB class must have one; this is "unlimited").
UNLIMITED_BPS = 10_000_000_000
# Filter priority of the per-destination filters on a machine's egress.
FILTER_PRIO = 1
ETH_P_IP = 0x0800


class TestbedUnavailable(Exception):
    """The testbed cannot be made here; the message says why (not root, no netlink)."""

    __test__ = False  # not a pytest test class, whatever its name


def unavailable() -> str:
    """Why a testbed cannot be made on this machine ("" when it can)."""
    if os.geteuid() != 0:
        return (
            "the testbed makes network namespaces and needs root (CAP_NET_ADMIN): run the "
            "tests as root (CI does), or in a container with --cap-add NET_ADMIN"
        )
    try:
        import pyroute2  # noqa: F401
    except ImportError:
        return "the testbed needs pyroute2: pip install 'satind[testbed]'"
    if not Path("/proc/self/ns/net").exists():
        return "this kernel has no network namespaces (/proc/self/ns/net)"
    return ""


@dataclass(frozen=True)
class Shape:
    """What happens to a machine's packets to one destination: dropped, or rate-limited."""

    drop: bool = False
    rate_bps: int = 0


@dataclass
class Network:
    """A testbed's bridge and namespaces. Make one with ``Network.create``; ``destroy``
    removes everything it made (also after a partial ``create``)."""

    index: int
    machines: list[str]
    net: str = DEFAULT_NET
    # machine -> destination IP -> shape of its egress to there.
    shapes: dict[str, dict[str, Shape]] = field(default_factory=dict)

    # -- names and addresses ----------------------------------------------------------------

    @property
    def bridge(self) -> str:
        return f"stb{self.index}"

    @property
    def host_ip(self) -> str:
        return f"{self.net}.{self.index}.{HOST_OCTET}"

    def netns(self, machine: str) -> str:
        return f"stb{self.index}-{machine}"

    def ip(self, machine: str) -> str:
        return f"{self.net}.{self.index}.{self.machines.index(machine) + 1}"

    def _veth(self, machine: str) -> str:
        return f"stb{self.index}{machine}"[:15]  # IFNAMSIZ

    # -- making and removing ----------------------------------------------------------------

    @classmethod
    def create(cls, machines: Sequence[str], net: str | None = None) -> Network:
        """Make the bridge and one namespace per machine.

        Raises:
            TestbedUnavailable: not root, no pyroute2, or the kernel refused (the message
                says what it said).
        """
        why = unavailable()
        if why:
            raise TestbedUnavailable(why)
        if not 1 <= len(machines) <= 250 or len(set(machines)) != len(machines):
            raise ValueError("a testbed has 1 to 250 machines with distinct names")
        net = net or os.environ.get("SATIND_TESTBED_NET", DEFAULT_NET)
        ipaddress.ip_network(f"{net}.0.0/16")  # ValueError for a bad prefix
        with _lock():
            index = _free_index()
            network = cls(index, list(machines), net)
            try:
                network._build()
            except BaseException:
                network.destroy()
                raise
        return network

    def _build(self) -> None:
        from pyroute2 import IPRoute, NetNS, netns

        with IPRoute() as ipr:
            ipr.link("add", ifname=self.bridge, kind="bridge")
            bridge = ipr.link_lookup(ifname=self.bridge)[0]
            ipr.addr("add", index=bridge, address=self.host_ip, prefixlen=24)
            ipr.link("set", index=bridge, state="up")
            for machine in self.machines:
                name = self.netns(machine)
                try:
                    netns.create(name)
                except OSError as exc:
                    raise TestbedUnavailable(f"cannot make namespace {name}: {exc}") from exc
                host_end, inner = self._veth(machine), f"{self._veth(machine)}i"[:15]
                if inner == host_end:
                    inner = host_end[:-1] + "i"
                ipr.link("add", ifname=host_end, kind="veth", peer={"ifname": inner})
                ipr.link("set", index=ipr.link_lookup(ifname=host_end)[0], master=bridge)
                ipr.link("set", index=ipr.link_lookup(ifname=host_end)[0], state="up")
                ipr.link("set", index=ipr.link_lookup(ifname=inner)[0], net_ns_fd=name)
                with NetNS(name) as ns:
                    eth = ns.link_lookup(ifname=inner)[0]
                    ns.link("set", index=eth, ifname="eth0")
                    ns.addr("add", index=eth, address=self.ip(machine), prefixlen=24)
                    ns.link("set", index=eth, state="up")
                    ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")
                self.shapes[machine] = {}
                self._shape(machine)

    def destroy(self) -> None:
        """Remove every namespace and link of this testbed (its processes must be gone: a
        namespace with a process in it lives on, unnamed, until that process ends)."""
        from pyroute2 import IPRoute, netns

        for machine in self.machines:
            with contextlib.suppress(OSError):
                netns.remove(self.netns(machine))
        with IPRoute() as ipr:
            for name in [self._veth(m) for m in self.machines] + [self.bridge]:
                found = ipr.link_lookup(ifname=name)
                if found:
                    with contextlib.suppress(Exception):
                        ipr.link("del", index=found[0])

    # -- faults -----------------------------------------------------------------------------

    def cut(self, a: Iterable[str], b: Iterable[str], *, both: bool = True) -> None:
        """Drop every packet from the machines of ``a`` to those of ``b`` (and back, unless
        ``both`` is false)."""
        self._set(a, b, Shape(drop=True), both)

    def throttle(
        self, a: Iterable[str], b: Iterable[str], rate_bps: int, *, both: bool = True
    ) -> None:
        """Limit the rate of packets from ``a``'s machines to ``b``'s to ``rate_bps`` bit/s
        (and back, unless ``both`` is false)."""
        if rate_bps <= 0:
            raise ValueError("a throttle's rate is a positive number of bit/s")
        self._set(a, b, Shape(rate_bps=rate_bps), both)

    def heal(self, a: Iterable[str] | None = None, b: Iterable[str] | None = None) -> None:
        """Undo every cut and throttle between ``a`` and ``b`` (both ways); with neither,
        every cut and throttle of the testbed."""
        sources = list(a) if a is not None else list(self.machines)
        targets = list(b) if b is not None else list(self.machines)
        for src, dst in _pairs(sources, targets, both=True):
            self.shapes[src].pop(self.ip(dst), None)
        for machine in {*sources, *targets}:
            self._shape(machine)

    def _set(self, a: Iterable[str], b: Iterable[str], shape: Shape, both: bool) -> None:
        sources, targets = list(a), list(b)
        for machine in [*sources, *targets]:
            if machine not in self.machines:
                raise ValueError(f"no machine {machine!r} in this testbed: {self.machines}")
        for src, dst in _pairs(sources, targets, both=both):
            self.shapes[src][self.ip(dst)] = shape
        for machine in {*sources, *targets}:
            self._shape(machine)

    def _shape(self, machine: str) -> None:
        """Rebuild ``machine``'s egress tree from ``shapes``."""
        from pyroute2 import NetNS

        with NetNS(self.netns(machine)) as ns:
            eth = ns.link_lookup(ifname="eth0")[0]
            with contextlib.suppress(Exception):  # none yet
                ns.tc("del", index=eth, handle="1:", parent=0xFFFFFFFF)
            ns.tc("add", "htb", index=eth, handle="1:", default=1, r2q=100000)
            ns.tc("add-class", "htb", index=eth, handle="1:1", parent="1:", rate=_bits(0))
            for n, (dst, shape) in enumerate(sorted(self.shapes[machine].items()), start=16):
                handle = f"1:{n:x}"
                ns.tc(
                    "add-class",
                    "htb",
                    index=eth,
                    handle=handle,
                    parent="1:",
                    rate=_bits(shape.rate_bps),
                    ceil=_bits(shape.rate_bps),
                )
                if shape.drop:
                    # A FIFO that holds nothing drops everything given to it.
                    ns.tc("add", "pfifo", index=eth, handle=f"{n:x}:", parent=handle, limit=0)
                ns.tc(
                    "add-filter",
                    "u32",
                    index=eth,
                    parent="1:",
                    prio=FILTER_PRIO,
                    protocol=ETH_P_IP,
                    target=handle,
                    keys=[_dst_key(dst)],
                )

    def shaped(self) -> dict[str, dict[str, str]]:
        """What is cut or throttled now: machine -> destination machine -> "cut" or a rate."""
        by_ip = {self.ip(m): m for m in self.machines}
        return {
            src: {by_ip[ip]: "cut" if s.drop else f"{s.rate_bps} bit/s" for ip, s in dsts.items()}
            for src, dsts in self.shapes.items()
            if dsts
        }

    def as_json(self) -> dict[str, Any]:
        shapes = {
            m: {ip: [s.drop, s.rate_bps] for ip, s in dsts.items()}
            for m, dsts in self.shapes.items()
        }
        return {"index": self.index, "machines": self.machines, "net": self.net, "shapes": shapes}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Network:
        """The network ``as_json`` described (it must still exist: ``load`` checks)."""
        shapes = {
            m: {ip: Shape(bool(d), int(r)) for ip, (d, r) in dsts.items()}
            for m, dsts in data.get("shapes", {}).items()
        }
        for machine in data["machines"]:
            shapes.setdefault(machine, {})
        return cls(int(data["index"]), list(data["machines"]), str(data["net"]), shapes)


def _pairs(a: Sequence[str], b: Sequence[str], *, both: bool) -> Iterator[tuple[str, str]]:
    for src in a:
        for dst in b:
            if src != dst:
                yield src, dst
                if both:
                    yield dst, src


def _bits(rate_bps: int) -> str:
    return f"{rate_bps or UNLIMITED_BPS}bit"


def _dst_key(ip: str) -> str:
    """A u32 key matching the IPv4 destination ``ip`` (bytes 16-19 of the IP header)."""
    return f"0x{int(ipaddress.IPv4Address(ip)):08x}/0xffffffff+16"


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    with (LOCK_DIR / "lock").open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _free_index() -> int:
    """The first testbed index whose bridge does not exist on this host."""
    names = {name for _, name in socket.if_nameindex()}
    for index in range(1, 250):
        if f"stb{index}" not in names:
            return index
    raise TestbedUnavailable(
        "every testbed index (1-249) is taken: `python -m satind.testbed down`"
    )


def in_namespace(pid: int, netns_name: str) -> bool:
    """Whether process ``pid`` lives in the named namespace (by the namespace's inode)."""
    try:
        want = os.stat(f"/run/netns/{netns_name}")
        have = os.stat(f"/proc/{pid}/ns/net")
    except OSError:
        return False
    return (want.st_dev, want.st_ino) == (have.st_dev, have.st_ino)


def pids_in(netns_name: str) -> list[int]:
    """Every process that lives in the named namespace, by id."""
    try:
        want = os.stat(f"/run/netns/{netns_name}")
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return []
        raise
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            have = os.stat(f"/proc/{entry}/ns/net")
        except OSError:
            continue
        if (have.st_dev, have.st_ino) == (want.st_dev, want.st_ino):
            found.append(int(entry))
    return found
