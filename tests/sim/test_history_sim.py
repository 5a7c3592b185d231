"""The run history in the simulator (node/history.py, node/recorder.py): the peers of one
"machine" share one SQLite file; a run whose master drained and handed it over is recorded
with both masters, by the master that ended it, with its result."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from satind.config import HistoryConfig
from satind.node.history import HistoryStore
from satind.sim.scenario import load
from satind.sim.simulator import Simulation

SCENARIOS = Path(__file__).parent.parent.parent / "configs" / "scenarios"


def test_a_handed_over_run_is_recorded_with_its_masters_and_its_result(tmp_path: Path) -> None:
    scenario = load(SCENARIOS / "master-drain.toml")
    path = tmp_path / "history.sqlite"
    history = dataclasses.replace(scenario.config.history, path=str(path))
    config = dataclasses.replace(scenario.config, history=history)
    sim = Simulation(dataclasses.replace(scenario, config=config), 1)
    report = sim.run()
    assert report.violations == [] and report.result_ok
    store = HistoryStore(path, HistoryConfig())
    store.open()  # every peer opened it at once, one made it: it is whole
    [record] = store.query()
    # The first master, then the one it handed the run to (epoch 1), which ended it.
    assert len(record.masters) == 2 and record.masters[0] == "c0/0@0", record.masters
    assert record.masters[1].endswith("@1") and record.state == "done"
    # Recorded by the last master or a copy's holder (each writes; the newer record wins).
    assert record.recorded_by != "c0/0"
    result = store.result(record.run_id)
    assert result is not None and result.error is None and result.value is not None
