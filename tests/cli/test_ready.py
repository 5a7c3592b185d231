"""`satind ready` decides from one shallow status reply (cli/ready.py)."""

from __future__ import annotations

import pytest

from satind.cli.ready import readiness
from satind.net import messages as m


def reply(*lines: tuple[str, str], joined: bool = True) -> m.StatusReply:
    """The answering peer's own line first (with ``joined``), then its view of the others."""
    peers = [m.PeerStatus(name, "c0", state) for name, state in lines]
    peers[0] = m.PeerStatus(peers[0].name, "c0", peers[0].state, joined=joined)
    return m.StatusReply(1, peers, [])


A0, A1, B0 = "a/0#x1", "a/1#x2", "b/0#y1"


@pytest.mark.parametrize(
    ("status", "peers", "members", "ok", "said"),
    [
        (
            reply((A0, "alive"), (A1, "alive"), (B0, "alive")),
            2,
            3,
            True,
            "a/0 joined; 2 peers of a up; 3 members up",
        ),
        (reply((A0, "alive")), None, 1, True, "a/0 joined; 1 peer of a up; 1 member up"),
        (
            reply((A0, "alive"), joined=False),
            None,
            1,
            False,
            "a/0 has not joined the system: its seeds have not answered (see its log)",
        ),
        (reply((A0, "draining"), (A1, "alive")), None, 1, False, "a/0 is draining"),
        (
            reply((A0, "standby"), (B0, "alive")),
            None,
            2,
            True,
            "a/0 joined; 1 peer of a up; 2 members up",
        ),
        (
            reply((A0, "alive"), (A1, "dead"), (B0, "alive")),
            None,
            1,
            False,
            "a peer of a is being recovered: a/1 dead",
        ),
        (
            reply((A0, "alive"), (A1, "suspect")),
            None,
            1,
            False,
            "a peer of a is being recovered: a/1 suspect",
        ),
        # A peer drained on purpose (left) stays down: the machine is ready without it...
        (
            reply((A0, "alive"), (A1, "left")),
            None,
            1,
            True,
            "a/0 joined; 1 peer of a up; 1 member up",
        ),
        # ... unless the probe asks for it.
        (reply((A0, "alive"), (A1, "left")), 2, 1, False, "1 of 2 peers of a are up"),
        (reply((A0, "alive"), (A1, "alive")), 3, 1, False, "2 of 3 peers of a are up"),
        # Another machine's dead peer is its business, not this machine's readiness.
        (
            reply((A0, "alive"), (B0, "dead")),
            None,
            1,
            True,
            "a/0 joined; 1 peer of a up; 1 member up",
        ),
        (reply((A0, "alive"), (B0, "dead")), None, 2, False, "1 of 2 members are up"),
    ],
)
def test_readiness(
    status: m.StatusReply, peers: int | None, members: int, ok: bool, said: str
) -> None:
    assert readiness(status, peers, members) == (ok, said)
