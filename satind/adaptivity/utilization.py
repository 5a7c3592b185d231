"""A peer's idle and wide-area waiting time (adaptivity/measure.py tells what they are for),
kept by the core on the times its events carry: no clock is read here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Utilization:
    """One peer's idle and wide-area waiting time so far."""

    idle_s: float = 0.0
    wide_wait_s: float = 0.0
    idle_since: float | None = None

    def set_idle(self, idle: bool, now: float) -> None:
        """The compute side wants work (and a run is active), or no longer does."""
        if idle and self.idle_since is None:
            self.idle_since = now
        elif not idle and self.idle_since is not None:
            self.idle_s += now - self.idle_since
            self.idle_since = None

    def idle_total(self, now: float) -> float:
        """Idle time so far, the stretch in progress included."""
        ongoing = 0.0 if self.idle_since is None else now - self.idle_since
        return self.idle_s + ongoing
