"""Total loss in the simulator (issue 6; kaapi §4): every peer is lost mid-run, fewer new peers
resume the run from the checkpoint logs on the shared mount. Always the exact answer, with
each policy, and with logs cut short and bit-flipped before the resume."""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

import pytest

from satind.sim.scenario import parse
from satind.sim.simulator import SimReport, simulate

SCENARIO = Path(__file__).parent.parent.parent / "configs" / "scenarios" / "total-loss.toml"
SEEDS = range(1, 9)
POLICIES = ("orphans", "tic", "sel")


@functools.cache
def _run(policy: str, seed: int, damage: int = 0) -> SimReport:
    data = tomllib.loads(SCENARIO.read_text())
    data["config"]["checkpoint"]["policy"] = policy
    if damage:
        # Between the loss and the resume: every log cut in its second half, bits flipped.
        data["faults"].append({"at": 9.0, "damage_logs": damage})
    scenario = parse(data)
    return simulate(scenario, seed)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("policy", POLICIES)
def test_a_run_survives_the_loss_of_every_peer(policy: str, seed: int) -> None:
    report = _run(policy, seed)
    assert report.violations == []
    assert report.result_ok and report.leaves_unique == report.leaves_expected
    assert report.checkpoint_bytes > 0
    # The resume ran on 3 new peers, and computed less than the whole tree when the logs
    # covered anything: the covered leaves were not run again.
    assert (
        report.leaves_after_resume + report.leaves_checkpointed - (report.checkpointed_redone)
        >= report.leaves_expected
    )
    if report.leaves_checkpointed:
        assert report.leaves_after_resume < report.leaves_expected


def test_checkpointed_results_are_reused_and_tic_and_sel_cover_more_than_orphans() -> None:
    by_policy = {p: [_run(p, seed) for seed in SEEDS] for p in POLICIES}
    for policy, reports in by_policy.items():
        covered = sum(r.leaves_checkpointed for r in reports)
        redone = sum(r.checkpointed_redone for r in reports)
        assert covered > 0, policy
        assert redone < covered, (policy, redone, covered)
    # Logging every completion ("sel"), or snapshots of the open frames' finished children
    # ("tic"), covers more of the tree than logging only what crossed a steal ("orphans").
    total = {p: sum(r.leaves_checkpointed for r in by_policy[p]) for p in POLICIES}
    assert total["sel"] > total["orphans"] and total["tic"] > total["orphans"]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_resume_from_cut_and_bit_flipped_logs_is_still_exact(seed: int) -> None:
    report = _run("sel", seed, damage=4)
    assert report.violations == []
    assert report.result_ok and report.leaves_unique == report.leaves_expected


def test_damaged_logs_cost_only_what_they_lost() -> None:
    intact = sum(_run("sel", seed).leaves_checkpointed for seed in SEEDS)
    damaged = sum(_run("sel", seed, damage=4).leaves_checkpointed for seed in SEEDS)
    # The damage took something (so the test above resumed from broken logs), not everything.
    assert 0 < damaged < intact


def test_a_total_loss_is_reproducible() -> None:
    again = _run.__wrapped__("tic", 3)
    assert again.trace_hash == _run("tic", 3).trace_hash
