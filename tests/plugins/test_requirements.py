"""What a plugin needs of a peer's environment (plugin/requirements.py)."""

from __future__ import annotations

import pytest

from satind import Plugin, spawnable
from satind.plugin import UNMET
from satind.plugin.requirements import gossiped, unmet, unmet_here


@spawnable
def noop() -> int:
    return 0


def plugin(*requires: str, name: str = "needy") -> Plugin:
    return Plugin(name=name, entry=noop, usage=name, parse=lambda argv: (), requires=requires)


def test_met_requirements_say_nothing() -> None:
    assert unmet(plugin()) == ""
    assert unmet(plugin("trio>=0.1", "cbor2")) == ""
    # A requirement whose marker does not apply here is not checked.
    assert unmet(plugin("no-such-distribution-xyz; python_version < '3'")) == ""


def test_unmet_requirements_say_which_and_why() -> None:
    why = unmet(plugin("trio>=999", "no-such-distribution-xyz>=1", "cbor2"))
    assert why.startswith("trio>=999 (has ")
    assert "no-such-distribution-xyz>=1 (not installed)" in why and "cbor2" not in why


def test_a_member_gossips_what_it_cannot_serve() -> None:
    ok, needy = plugin(name="ok"), plugin("no-such-distribution-xyz", name="needy")
    found = {"ok": ok, "needy": needy}
    gossip = gossiped(found)
    assert gossip["ok"] == ok.code_hash
    assert gossip["needy"] == UNMET + "no-such-distribution-xyz (not installed)"
    assert unmet_here(found) == {("needy", ""): "no-such-distribution-xyz (not installed)"}


def test_a_bad_requirement_is_refused_when_the_plugin_is_made() -> None:
    with pytest.raises(ValueError, match="bad requirement 'numpy>>1'"):
        plugin("numpy>>1")
    with pytest.raises(TypeError, match="a list of requirements"):
        Plugin(name="x", entry=noop, usage="x", parse=lambda argv: (), requires="numpy")  # type: ignore[arg-type]
