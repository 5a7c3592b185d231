"""Who may undo whose reclaim (node/reclaims.py): the owner watch never undoes a reclaim by
hand, and a release or an admission by hand waits while the owner is at work."""

from __future__ import annotations

from satind.node.reclaims import Reclaims


def test_the_owner_releases_only_what_it_reclaimed() -> None:
    r = Reclaims()
    assert r.owner(True, reclaimed=False) is True  # the owner at work: reclaim
    assert r.owner(True, reclaimed=True) is None  # still at work: nothing new
    assert r.owner(False, reclaimed=True) is False  # gone: release
    assert r.owner(False, reclaimed=False) is None


def test_a_reclaim_by_hand_outlives_the_owner() -> None:
    r = Reclaims()
    assert r.owner(True, reclaimed=False) is True
    assert r.by_hand(True)  # the operator reclaims it too: theirs now
    assert r.owner(False, reclaimed=True) is None  # the owner's going does not release it
    assert r.by_hand(False)  # the operator's release does


def test_a_release_or_an_admission_by_hand_waits_for_the_owner() -> None:
    r = Reclaims()
    # A standby peer (reclaimed, not by the owner) whose machine's owner is at work.
    assert r.owner(True, reclaimed=True) is None
    assert not r.by_hand(False)  # admitted by a coordinator: stays reclaimed, the owner's
    assert r.owner(False, reclaimed=True) is False  # released when the owner is gone
    assert r.by_hand(False)  # and a release with nobody at work goes ahead
