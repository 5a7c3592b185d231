"""Exit codes of the ``satind`` command, and the error that carries one.

0 success; 1 the plugin raised or its result failed its check (the message carries the remote
traceback); 2 usage error (unknown plugin, bad arguments, bad options or config); 3 the runtime
failed (a peer did not start or answer, a connection was lost).
"""

from __future__ import annotations

from typing import Literal

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_RUNTIME = 3

# A failed run's kind (client.runner.Failure) -> its exit code.
FOR_FAILURE: dict[Literal["usage", "plugin", "runtime"], int] = {
    "usage": EXIT_USAGE,
    "plugin": EXIT_FAILED,
    "runtime": EXIT_RUNTIME,
}


class CliError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code
