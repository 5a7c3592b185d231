"""Who holds a port (ops/ports.py), from this machine's /proc: the daemon names them when a
restarted peer's port is still held."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from satind.ops.ports import holders


def test_the_process_with_a_listening_socket_on_a_port_is_found() -> None:
    with socket.socket() as listening, socket.socket() as bound_only:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        bound_only.bind(("127.0.0.1", 0))  # bound, not listening: holds no peer's place
        assert holders([port]) == [os.getpid()]
        assert holders([0, port]) == [os.getpid()]
        assert holders([bound_only.getsockname()[1]]) == []
    assert holders([port]) == []  # closed
    assert holders([]) == [] and holders([0]) == []


def test_without_a_readable_proc_nothing_is_found(tmp_path: Path) -> None:
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text("header\nnot a table line\n")
    assert holders([7420], proc=tmp_path) == []
    assert holders([7420], proc=tmp_path / "missing") == []
