"""Handing the heap memory a process has freed back to the system.

CPython frees into the C allocator, and glibc's keeps what it gets back for later: a peer
that held 80 MiB of replies for a client that never read them kept its RSS 80 MiB higher
after the client had gone. ``malloc_trim(0)`` returns every free page of the heap to the
system (glibc 2.8 and later also return pages inside the heap, not only at its top). Where
the C library has no such call (musl, macOS), trimming does nothing.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable


def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None).malloc_trim  # the C library this process already runs on
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


_TRIM = _malloc_trim()


def trim() -> bool:
    """Return the heap's free pages to the system (a few milliseconds per 100 MB freed,
    microseconds when there is nothing to return). False where the allocator cannot."""
    if _TRIM is None:
        return False
    _TRIM(0)
    return True
