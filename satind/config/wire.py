"""Settings of the wire and of membership: framing, caps and budgets, SWIM, wide-area emulation.

A section of satind's configuration (satind/config/__init__.py says how the sections are
grouped): each field's default is the only place that default lives, with its unit and why.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NetConfig:
    """Framing, caps and timeouts of the wire (DESIGN "Wire and security")."""

    # bytes. Largest frame accepted; a bigger length prefix closes the connection. Big enough
    # for a stolen job carrying a sizeable array, small enough that a hostile prefix cannot
    # make a peer allocate gigabytes.
    max_frame_bytes: int = 64 * 1024 * 1024
    # levels. Nesting cap for application values (job arguments and results), which plugins
    # may nest deeply (a tree as nested tuples); cbor2 refuses deeper input.
    max_depth: int = 200
    # levels. Nesting cap for protocol messages: the deepest message nests 5 levels, so 16
    # leaves room for new fields and refuses deep junk before cbor2 recurses into it.
    max_message_depth: int = 16
    # count. CBOR items (integers, strings, array and map entries...) one message may hold.
    # cbor2 builds a Python object of tens of bytes per item, so a 16 MiB frame of one-byte
    # items would cost gigabytes and seconds; a frame longer than this many bytes is scanned
    # first and refused when over (codec.scan_items). The largest legitimate messages (orphan
    # tables in chunks of ft.tuples_per_message, hand-overs in chunks) stay well below.
    max_items: int = 262_144
    # seconds. Connect plus handshake must finish within this.
    connect_timeout_s: float = 5.0
    # seconds. Closing a connection (a TLS goodbye to a peer that may be gone) gives up after
    # this long.
    close_timeout_s: float = 1.0
    # seconds. A connection whose sent data stays unacknowledged this long is given up by the
    # kernel (TCP_USER_TIMEOUT; Linux): the next message dials again. Without it a
    # connection that lived through a cut link kept its data in TCP's retransmission back-off
    # (seconds by then) after the link healed, and a 10 s partition took 4-8 s to heal where
    # a 60 s one, whose connections had been replaced, took 0.7 s. The kernel acknowledges
    # data for a peer however busy its interpreter, so only the network trips it. 0: the
    # kernel's default (minutes).
    tcp_user_timeout_s: float = 3.0
    # seconds. A frame whose length prefix has arrived must arrive whole within this plus its
    # length at min_receive_rate: a sender that stalls inside a frame (deliberately or not)
    # is cut off instead of pinning the half-received frame in memory forever. Idle
    # connections between frames have no timeout: peers and clients keep links open.
    read_timeout_s: float = 30.0
    # bytes per second. The slowest transfer a frame is allowed (see read_timeout_s): 64 MiB
    # may take 30 s + 64 s. Slower than any link peers compute over (the wide-area links of
    # the Satin papers' experiments are 10-100 times faster).
    min_receive_rate: float = 1024.0 * 1024
    # bytes. Frames being received at once from members, over all their connections. What
    # counts is what arrived, not what a header declares (a stalled header costs its four
    # bytes): a frame whose bytes would go over closes its connection (the sender retries
    # later), so however many members send at once, receiving from them costs at most this.
    # Clients never count here: they have budgets of their own (below), so no client can
    # make a peer refuse its members' frames.
    max_receive_bytes: int = 256 * 1024 * 1024
    # bytes. Frames being received at once from clients, all of them together (counted as
    # for members). Smaller than the members' budget: clients submit and ask, members move
    # jobs and results.
    max_client_receive_bytes: int = 128 * 1024 * 1024
    # bytes. Frames being received at once from one client certificate, over all its
    # connections (connections count by the certificate's name, tls.client_base_name): one
    # client cannot use up what the others need. Room for one frame of max_frame_bytes and
    # the small requests of its other connections.
    max_receive_bytes_per_client: int = 80 * 1024 * 1024
    # bytes. Messages queued for one connection and not yet written, counting what is being
    # written at the moment and what holding each costs besides its bytes (net/outbox.py):
    # memory, not payload. A reader that stops reading (a stuck client) makes its
    # connection's queue grow; past this, the connection is closed and the queued messages
    # dropped (what was lost is recovered like any lost message: steals time out, custody
    # queries resend, clients ask again). Room for one frame of max_frame_bytes.
    max_outbox_bytes: int = 80 * 1024 * 1024
    # bytes. The same, over all connections to members together.
    max_send_bytes: int = 256 * 1024 * 1024
    # bytes. The same, over all connections to clients together: a client that does not
    # read never makes a peer drop what it sends its members.
    max_client_send_bytes: int = 128 * 1024 * 1024
    # bytes. The same, over all connections of one client certificate.
    max_send_bytes_per_client: int = 80 * 1024 * 1024
    # bytes. Once connections that held this much have closed (each counts its TLS state,
    # about 24 KiB, and the most it held at once: a frame being received, messages waiting
    # to be written), or a frame this large has been handled, the peer hands the heap memory
    # it freed back to the system (satind/heap.py; microseconds to a few milliseconds).
    # Without it, a client that did not read, or many connections at once, left the peer's
    # RSS that much higher after they had gone. Smaller trims more often; 0: never.
    trim_after_bytes: int = 4 * 1024 * 1024
    # bytes. A frame of which at least this much came after its header was read measures the
    # bandwidth from its sender: those bytes over the time they took to come (a sender slower
    # than the link reads as its own rate; bytes that were waiting in a buffer while the
    # reader was busy came faster than a millisecond and are dropped). SPMD runs weigh moves
    # with it (core/spmd/, docs/spmd.md); smaller frames arrive in one read and say nothing.
    bandwidth_sample_bytes: int = 64 * 1024
    # count. Connections one peer holds at once (peers and clients, being set up or live);
    # more are refused at accept. A peer needs one per other member it talks to (and one
    # file descriptor each: raise `ulimit -n` past 1,024 for systems that large).
    max_connections: int = 2048
    # count. Connections one client certificate may hold at once on one peer (a status
    # --watch, a submit --wait and a few commands need far fewer).
    max_client_connections: int = 16
    # count. Requests one connection may have in flight at a peer (answered from a task: a
    # status that asks every member, a result that waits). Past it, a request is answered
    # at once with an error: a client flooding deep status requests would otherwise hold
    # a task, and the members' answers, per request.
    max_requests_in_flight: int = 64
    # Mutual TLS on every connection. Turning it off exists only to measure what TLS costs
    # (docs/benchmarks.md); a system without it lets anyone who can connect run code.
    tls: bool = True


@dataclass(frozen=True)
class MembershipConfig:
    """SWIM failure detection with the Lifeguard refinements, and gossip (after memberlist's
    DefaultLANConfig; the formulas are in membership/rules.py)."""

    # seconds. One member probed per interval, round robin. Detection time grows with it,
    # probe traffic falls with it.
    probe_interval_s: float = 1.0
    # seconds. Wait this long for a direct ack before asking others to probe.
    probe_timeout_s: float = 0.5
    # count. Members asked to probe indirectly when a direct probe fails.
    indirect_checks: int = 3
    # multiplier. Suspicion lasts suspicion_mult * max(1, log10 N) * probe interval at least
    # (more members, slower spread of the refutation)...
    suspicion_mult: int = 4
    # multiplier. ... and at most this many times that, shrinking as independent members
    # confirm the suspicion (Lifeguard).
    suspicion_max_mult: int = 6
    # multiplier. An update is gossiped retransmit_mult * ceil(log10(N + 1)) times.
    retransmit_mult: int = 4
    # seconds. A gossip round: send pending updates to gossip_nodes random members.
    gossip_interval_s: float = 0.2
    gossip_nodes: int = 3
    # count. Most updates piggybacked on one message.
    gossip_max_items: int = 64
    # seconds. Full state exchange with a random member, repairing what gossip missed.
    push_pull_interval_s: float = 30.0
    # count. Lifeguard's local health score ceiling: probe timeouts scale by (score + 1).
    awareness_max: int = 8
    # seconds. Gossip also goes to members declared dead this recently, so that one wrongly
    # declared dead (a partition that healed) hears it and refutes.
    gossip_to_dead_s: float = 30.0
    # seconds. Dead and left members are remembered this long (so stale gossip cannot revive
    # them), then forgotten.
    tombstone_s: float = 600.0
    # seconds. Every this often a member sends a state sync to one address, at random, of a
    # slot it saw alive and now believes dead or gone (and to its seeds while it sees no other
    # machine): how a healed partition or a restarted machine finds the system again
    # (membership/rejoin.py). Serf's reconnect interval is 30 s; here it bounds the time to
    # heal, and an address that stays dark costs one refused or timed-out dial per interval.
    reconnect_interval_s: float = 2.0
    # seconds. A slot seen alive this recently is reconnected to (Serf: 24 h); then given up.
    reconnect_timeout_s: float = 86400.0
    # seconds. A restarted peer without seeds of its own (the first machine) tries the members
    # it remembered this long before it starts on its own (and goes on reconnecting).
    rejoin_timeout_s: float = 5.0
    # seconds. A daemon's peer writes the members it sees alive to its state directory at
    # most this often (node/remember.py): what it rejoins through after a restart.
    remember_interval_s: float = 10.0
    # seconds. A member that sees no other machine's peer alive this long, while it knows
    # where some were, says so at WARNING (again every this long).
    split_warning_s: float = 60.0
    # seconds. A joiner retries its seeds this long before giving up.
    join_timeout_s: float = 30.0
    # seconds. A joiner asks its seeds again after this long without an answer.
    join_retry_s: float = 1.0
    # seconds. A joiner syncs state with a seed once more this long after joining: members
    # that joined at about the same time were announced while its own join was in flight.
    sync_after_join_s: float = 2.0
    # seconds. How often tombstones older than tombstone_s are forgotten.
    tombstone_sweep_s: float = 60.0
    # seconds. A leaving peer (or one told to stop) waits this long after sending its
    # goodbyes and replies before it closes its connections, so that they reach the wire.
    leave_linger_s: float = 0.2


@dataclass(frozen=True)
class EmulationConfig:
    """Wide-area emulation for experiments on one machine: applied by the transport to traffic
    between peers of different clusters. This is an emulation, not a network model: it delays
    each frame by the latency and paces each connection to the bandwidth. 0 turns it off."""

    # milliseconds, one way.
    latency_ms: float = 0.0
    # megabytes per second per connection.
    bandwidth_mbps: float = 0.0
