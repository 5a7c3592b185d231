"""Hypothesis-generated garbage sent to a real peer over an authenticated TLS connection:
random bytes, truncated CBOR, wrong types, huge length prefixes, deep nesting. Each costs only
its own connection; the peer keeps serving."""

from __future__ import annotations

import cbor2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from satind.net import codec
from satind.net import messages as m
from tests.security.live import LivePeer, live, read_frames, send_frame, still_serves, tls_client

__all__ = ["live"]  # the fixture, used by name


def _framed(body: bytes) -> bytes:
    return codec.FRAME_HEADER.pack(len(body)) + body


valid_bodies = st.sampled_from(
    [
        codec.encode_message(m.StatusRequest(1, False)),
        codec.encode_message(m.Submit(2, "fib", ["10"])),
        codec.encode_message(m.ResultRequest(3, "x", False)),
    ]
)
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.lists(st.integers(), max_size=3),
    st.floats(allow_nan=False),
)
type_codes = st.sampled_from([c.TYPE for c in m.MESSAGE_TYPES] + [9999, -1])

garbage = st.one_of(
    # random bytes in a well-formed frame (that is not valid CBOR of a valid message)
    st.binary(min_size=1, max_size=300).map(_framed),
    # a huge length prefix
    st.integers(min_value=64 * 1024 * 1024 + 1, max_value=2**32 - 1).map(
        lambda n: codec.FRAME_HEADER.pack(n) + b"\x00" * 16
    ),
    # truncated CBOR of a real message
    st.tuples(valid_bodies, st.integers(min_value=1, max_value=30)).map(
        lambda t: _framed(t[0][: max(1, len(t[0]) - t[1])])
    ),
    # a real type code with fields of the wrong types
    st.tuples(
        type_codes,
        st.dictionaries(
            st.sampled_from(["req", "run_id", "plugin", "argv", "deep", "wait", "x"]),
            junk,
            max_size=4,
        ),
    ).map(lambda t: _framed(cbor2.dumps({"t": t[0], **t[1]}))),
    # deep nesting
    st.integers(min_value=250, max_value=3000).map(
        lambda d: _framed(b"\xa2\x61t\x18\x3c\x63req" + b"\x81" * d + b"\x00")
    ),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=garbage)
def test_garbage_costs_only_its_connection(live: LivePeer, data: bytes) -> None:
    try:
        codec.decode_message(data[4:])
        if len(data) - 4 == codec.FRAME_HEADER.unpack(data[:4])[0]:
            return  # hypothesis built a valid message by chance: nothing to test
    except codec.DecodeError:
        pass
    assert send_frame(live, data), "the peer kept a connection that sent garbage"


def test_the_peer_still_serves_after_the_garbage(live: LivePeer) -> None:
    assert still_serves(live)
    assert live.peer.transport.counters.bad_frames >= 1


def test_a_weight_out_of_range_refuses_that_submission_only(live: LivePeer) -> None:
    # A hostile client's run weight (a steal share): refused before any code is parsed, with
    # what the range is; the connection stays and serves the next request.
    with tls_client(live) as sock:
        for req, weight in enumerate((-1.0, 0.0, 1e9), start=1):
            sock.sendall(
                codec.frame(codec.encode_message(m.Submit(req, "fib", ["10"], weight=weight)))
            )
        replies = read_frames(sock, 4)[1:]  # its Hello first
        assert [type(r) for r in replies] == [m.Submitted] * 3, replies
        for reply in replies:
            assert isinstance(reply, m.Submitted) and reply.run_id == "" and reply.error
            assert "more than 0 and at most 1000" in reply.error.message
    assert still_serves(live)
