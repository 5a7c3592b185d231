"""Peer names: a slot and an instance.

A daemon runs peers in **slots** named ``NODE/INDEX`` (``b/0``; the certificate named ``NODE``
grants them, net/tls.py) and restarts a crashed one in the same slot, at the same address. The
process in a slot is an **instance**, numbered by its start time, and its name on the wire and
in every table is the slot with the instance appended: ``b/0#k2j9x1``. So whatever a peer is
responsible for belongs to one process, and a restarted peer is a new member that knows nothing
of its predecessor's runs (membership/view.py declares the old one dead when the new one
appears). An operator names a slot; the tables resolve it to the process there now.
"""

from __future__ import annotations

# Between a slot and its instance tag: a character neither a certificate name, the peer
# separator "/" nor a client name's "~" uses (net/tls.py).
INSTANCE_SEPARATOR = "#"
# Between a client certificate's name and a connection's suffix (``alice~3f2a``): every
# connection of a client is the same client (its limits, its runs).
CLIENT_SEPARATOR = "~"
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"
_TAG_RANGE = 36**6


def peer_name(slot: str, instance: int) -> str:
    """The name of process ``instance`` of ``slot``: ``b/0#k2j9x1``. Six base-36 digits of
    the instance keep it short; which instance is newer is the member's ``instance`` field's
    business, not the tag's."""
    n = instance % _TAG_RANGE
    tag = ""
    while True:
        n, digit = divmod(n, 36)
        tag = _DIGITS[digit] + tag
        if n == 0:
            return f"{slot}{INSTANCE_SEPARATOR}{tag}"


def slot_of(name: str) -> str:
    """The slot a peer name runs in (``b/0#k2j9x1`` -> ``b/0``; a name without a tag is its
    own slot)."""
    return name.split(INSTANCE_SEPARATOR, 1)[0]


def answers_to(remote: str, expected: str) -> bool:
    """Whether a party that proved the name ``remote`` is the one a dialler ``expected``: the
    same process, or any process in the slot when only a slot was named (a client asked for
    ``b/0``)."""
    if INSTANCE_SEPARATOR in expected:
        return remote == expected
    return slot_of(remote) == expected


def client_base_name(claimed: str) -> str:
    """The certificate name behind a client's connection name (``client~3f2a`` -> ``client``):
    whose runs it submits, and what per-client limits count by."""
    return claimed.split(CLIENT_SEPARATOR, 1)[0]
