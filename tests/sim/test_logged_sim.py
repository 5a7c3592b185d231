"""A partial crash with checkpoints on (issue 31; satin-grid-programming-model §5.5, Fig 6;
kaapi §3): a whole cluster crashes mid-run, and the survivors reuse what the crashed peers
logged — read from the shared mount, or from copies kept on members when every machine logs to
its own disk — instead of computing it again. Always the exact answer."""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path

import pytest

from satind.sim.scenario import parse
from satind.sim.simulator import SimReport, simulate

SCENARIO = (
    Path(__file__).parent.parent.parent / "configs" / "scenarios" / "cluster-crash-checkpoints.toml"
)
SEEDS = range(1, 7)


@functools.cache
def _run(
    seed: int, where: str = "shared", policy: str = "tic", copies: int = 1, cluster: str = "c1"
) -> SimReport:
    data = tomllib.loads(SCENARIO.read_text())
    data["faults"][0]["crash_cluster"] = cluster
    if where == "none":
        del data["config"]["checkpoint"]
    else:
        data["config"]["checkpoint"].update(dir=where, policy=policy, copies=copies)
    return simulate(parse(data), seed)


def _exact(report: SimReport) -> None:
    assert report.violations == []
    assert report.result_ok and report.leaves_unique == report.leaves_expected


@pytest.mark.parametrize("seed", SEEDS)
def test_survivors_reuse_a_crashed_clusters_logged_work_from_a_shared_mount(seed: int) -> None:
    report = _run(seed)
    _exact(report)
    assert report.jobs_restarted > 0
    assert report.results_from_logs > 0
    # Reused, not computed again: fewer of the crashed peers' finished leaves ran twice than
    # without checkpoints.
    assert report.crashed_redone < _run(seed, "none").crashed_redone


@pytest.mark.parametrize("seed", SEEDS)
def test_a_new_master_reuses_what_the_crashed_masters_cluster_logged(seed: int) -> None:
    # The master's cluster crashes: the elected master reads the logs before it respawns the
    # root, so the whole re-derived tree finds what the lost peers had finished.
    report = _run(seed, cluster="c0")
    _exact(report)
    assert report.results_from_logs > 0
    assert report.crashed_redone < _run(seed, "none", cluster="c0").crashed_redone


@pytest.mark.parametrize("seed", SEEDS)
def test_copies_on_members_serve_when_every_machine_logs_to_its_own_disk(seed: int) -> None:
    report = _run(seed, "local", copies=1)
    _exact(report)
    assert report.results_from_logs > 0
    # Without copies a crashed peer's own disk is out of reach: its log is not read.
    alone = _run(seed, "local", copies=0)
    _exact(alone)
    assert alone.results_from_logs < report.results_from_logs


@pytest.mark.parametrize("seed", SEEDS)
def test_sel_loses_no_finished_task_in_a_crash(seed: int) -> None:
    # Each completion is logged as it happens: every leaf the crashed peers had finished is
    # read back, none is run again (the logging here is synchronous: a real disk's fsync
    # leaves the completions of one batch in flight).
    report = _run(seed, policy="sel")
    _exact(report)
    assert report.crashed_redone == 0
    assert _run(seed, "none").crashed_redone > 0
