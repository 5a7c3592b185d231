"""A run's output as the client shows it: `satind logs` begins each line with when its peer
wrote it (issue 32, point 3); `satind run` and `Run.logs()` show the lines as they are."""

from __future__ import annotations

from typing import cast

from satind.cli.parser import build
from satind.client import client as remote
from satind.client.api import Cluster, Run, log_time
from satind.config import Config
from satind.net import messages as m

# 2026-11-26T10:01:02.345Z, and a millisecond and a half later.
AT = 1795687262.345
LATER = AT + 0.0015


class _Peer:
    """Answers a client's LogsRequests with one reply."""

    def __init__(self, reply: m.LogsReply) -> None:
        self.reply = reply

    async def logs(self, run_id: str, start: int, within_s: float) -> m.LogsReply:
        return self.reply


async def _logs(timestamps: bool) -> list[str]:
    reply = m.LogsReply(0, ["local/0: hello", "local/1: WARNING chatty: x"], [AT, LATER], 2, True)
    run = Run(Cluster(cast(remote.Client, _Peer(reply)), Config()), "r-1")
    return [line async for line in run.logs(timestamps=timestamps)]


def test_log_time_is_utc_to_the_millisecond() -> None:
    assert log_time(AT) == "2026-11-26T10:01:02.345Z"
    assert log_time(LATER) == "2026-11-26T10:01:02.346Z"
    assert log_time(0.0) == "1970-01-01T00:00:00.000Z"


async def test_lines_begin_with_when_their_peer_wrote_them_when_asked() -> None:
    assert await _logs(timestamps=True) == [
        "2026-11-26T10:01:02.345Z local/0: hello",
        "2026-11-26T10:01:02.346Z local/1: WARNING chatty: x",
    ]
    assert await _logs(timestamps=False) == ["local/0: hello", "local/1: WARNING chatty: x"]


def test_satind_logs_shows_times_unless_told_not_to() -> None:
    parser, _ = build()
    assert parser.parse_args(["logs", "r-1"]).timestamps is True
    assert parser.parse_args(["logs", "r-1", "--no-timestamps"]).timestamps is False
