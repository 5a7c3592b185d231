"""Who reclaimed this peer, and who may release it: an operator or a coordinator (`satind
reclaim`/`release`, a standby peer's admission) or the daemon's owner watch (``[owner]
reclaim``, ops/owner.py). The rules, as plain code: the owner watch never undoes a reclaim by
hand, and a release or an admission by hand waits while the owner is at work (the machine is
the owner's first)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Reclaims:
    # The owner watch's last verdict, and whether the reclaim in force is the watch's own.
    owner_busy: bool = False
    by_owner: bool = False

    def by_hand(self, reclaimed: bool) -> bool:
        """An operator or a coordinator reclaims (True) or releases (False) the peer: whether
        to go ahead. A release while the owner is at work does not: the peer stays
        reclaimed, now the watch's, until the owner is gone."""
        if reclaimed:
            self.by_owner = False
            return True
        if self.owner_busy:
            self.by_owner = True
            return False
        return True

    def owner(self, busy: bool, reclaimed: bool) -> bool | None:
        """The owner watch's verdict on a peer that is ``reclaimed`` or not: reclaim it
        (True), release it (False), or leave it as it is (None)."""
        self.owner_busy = busy
        if busy and not reclaimed:
            self.by_owner = True
            return True
        if not busy and self.by_owner:
            self.by_owner = False
            return False
        return None
