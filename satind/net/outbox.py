"""What waits to be written to one connection, and what holding it costs the peer.

Everything queued counts in the connection's budget (``net.max_outbox_bytes``, within its
members' or its client's) until the writer has written it: a reader that does not read holds
what it did not read against those caps, the write in progress included.

Small frames are joined into chunks as they are queued. Kept one by one, each small frame is
a few Python objects: 260,000 status replies queued for a client that never read them cost a
third more than their bytes, and left the peer's small-object arenas fragmented, so that its
RSS stayed up after the client had gone. Joined, they are a few large buffers, freed whole.
A large frame keeps its own entry (copying it would cost its size again). Under wide-area
emulation every frame keeps its own entry: each leaves ``latency`` after it was posted.
"""

from __future__ import annotations

import sys
from collections import deque

from satind.net.framing import ByteBudget

# bytes. Small frames are joined up to this much per chunk: one write each, big enough that
# small messages go out in few system calls, small enough that what is being written (and
# its TLS copy) stays small next to the outbox it is counted in.
CHUNK_BYTES = 256 * 1024
# bytes. Frames this large or larger are not copied into a chunk.
JOIN_BELOW = CHUNK_BYTES // 4


class Pending:
    """Frames that go out in one write: one frame, or small ones joined."""

    __slots__ = ("cost", "data", "frames", "posted")

    def __init__(self, posted: float, data: bytes | bytearray, cost: int) -> None:
        self.posted = posted
        self.data = data
        self.frames = 1
        self.cost = cost


# bytes. What an entry costs besides its bytes: the entry, its buffer's header, the time and
# the deque's slot.
ENTRY_BYTES = (
    sys.getsizeof(Pending(0.0, b"", 0)) + sys.getsizeof(bytearray()) + sys.getsizeof(0.0) + 8
)


class Outbox:
    def __init__(self, budget: ByteBudget, join: bool) -> None:
        self.budget = budget
        self.join = join
        self.peak = 0  # the most it held at once (net.trim_after_bytes)
        self.frames = 0  # frames queued, not yet taken by the writer
        self._items: deque[Pending] = deque()
        self._cleared = False

    def __bool__(self) -> bool:
        return bool(self._items)

    def add(self, data: bytes, now: float) -> ByteBudget | None:
        """Queue a frame; None when it was, else the budget it would have gone over (and
        nothing was queued)."""
        items = self._items
        last = items[-1] if items else None
        if (
            last is not None
            and isinstance(last.data, bytearray)
            and len(last.data) + len(data) <= CHUNK_BYTES
        ):
            # A bytearray grows by an eighth more than it needs: counted with each frame.
            cost = len(data) + len(data) // 8
            full = self.budget.refuses(cost)
            if full is not None:
                return full
            last.data += data
            last.frames += 1
            last.cost += cost
        else:
            cost = len(data) + ENTRY_BYTES
            full = self.budget.refuses(cost)
            if full is not None:
                return full
            joinable = self.join and len(data) < JOIN_BELOW
            items.append(Pending(now, bytearray(data) if joinable else data, cost))
        self.budget.take(cost)
        self.peak = max(self.peak, self.budget.used)
        self.frames += 1
        return None

    def take(self) -> Pending:
        """The next frames to write, in order; they stay counted until ``written``."""
        item = self._items.popleft()
        self.frames -= item.frames
        return item

    def written(self, item: Pending) -> None:
        if not self._cleared:  # cleared: everything was given back already
            self.budget.give_back(item.cost)

    def clear(self) -> None:
        """Drop everything, what is being written included (the connection is closing)."""
        self._cleared = True
        self.budget.give_back(self.budget.used)
        self._items.clear()
        self.frames = 0
