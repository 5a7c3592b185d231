"""The base of every message, and the messages every connection and every request share:
the Hello and Bye of a connection, and the ErrorReply a request gets when its handler fails.

The catalogue of all messages (type codes, the protocol version, which are requests and which
answers) is messages.py; the messages themselves live beside it by mechanism, each module
importing this one for ``Message``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from satind.net.records import ErrorInfo


@dataclass(frozen=True)
class Message:
    """Base class; subclasses set TYPE."""

    TYPE: ClassVar[int] = -1


@dataclass(frozen=True)
class Hello(Message):
    """First frame in each direction. ``role`` is "peer" or "client"."""

    TYPE: ClassVar[int] = 1
    version: int
    sender: str
    cluster: str
    role: str


@dataclass(frozen=True)
class Bye(Message):
    """The sender closes this connection, saying why."""

    TYPE: ClassVar[int] = 2
    reason: str


@dataclass(frozen=True)
class ErrorReply(Message):
    """The answer to a request whose handler failed (a plugin's parse that raised, a bug):
    why, at once, instead of silence until the asker's timeout."""

    TYPE: ClassVar[int] = 71
    req: int
    error: ErrorInfo
