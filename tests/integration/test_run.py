"""`satind run` end to end with real peer processes: every plugin's answer under every
stealing algorithm, the JSON, the exit codes, and no process left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from satind_plugins import knapsack, sat, tsp

from satind import cli, stats
from tests import independent
from tests.integration.procs import alive, children_of, kill_all, peers_of

pytestmark = pytest.mark.slow
DATA = Path(__file__).parent.parent / "data"
RUN_TIMEOUT = 120


def satind(*args: str, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "satind", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_json(*args: str) -> dict[str, Any]:
    proc = satind("run", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout  # exactly one JSON object on stdout
    result: dict[str, Any] = json.loads(lines[0])
    return result


def _knapsack_answer(items: int, seed: int) -> int:
    (w, v), cap = knapsack.instance(items, seed)
    return independent.knapsack(list(w), list(v), cap)


def _sat_answer(variables: int, seed: int) -> bool:
    return independent.satisfiable(list(sat.random_3sat(variables, seed)), variables)


WORKLOADS = [
    (["fib", "25", "12"], lambda r: r == independent.fib(25)),
    (["nqueens", "9", "2"], lambda r: r == independent.nqueens(9)),
    (["knapsack", "40", "1"], lambda r: r == _knapsack_answer(40, 1)),
    (["tsp", "8", "5"], lambda r: r == independent.tsp(tsp.cities(8, 5))),
    (["raytracer", "64", "48"], None),  # compared with the 1-peer hash below
    (["sat", "random", "14", "3"], lambda r: r["sat"] == _sat_answer(14, 3)),
    (["tree", "3", "4", "4", "sleep"], lambda r: r == independent.tree(3, 4)),
]
CONFIGS = [
    ["--peers", "1"],
    ["--peers", "4", "--steal", "rs", "--clusters", "2"],
    ["--peers", "4", "--steal", "crs", "--clusters", "2"],
]

_raytracer_hashes: set[str] = set()


# Every plugin on one peer and on four with CRS (the default); RS on four for two plugins
# (test_crs_steals_inside_the_cluster_and_rs_across tests RS itself): the suite's time.
PAIRS = [
    pytest.param(w, c, id=f"{w[0][0]}-{cid}")
    for w in WORKLOADS
    for c, cid in zip(CONFIGS, ["1peer", "4rs", "4crs"], strict=True)
    if cid != "4rs" or w[0][0] in ("fib", "raytracer")
]


@pytest.mark.parametrize(("workload", "config"), PAIRS)
def test_every_plugin_gives_the_sequential_answer(workload: Any, config: list[str]) -> None:
    argv, is_right = workload
    out = run_json(*argv, *config, "--seed", "3")
    assert out["check"] in ("ok", "skipped")
    if is_right is None:
        _raytracer_hashes.add(out["result"])
        assert len(_raytracer_hashes) == 1  # the same picture on 1 peer, under RS and CRS
    else:
        assert is_right(out["result"]), out
    stats = out["stats"]
    # Every spawned job ran exactly once, wherever it ran.
    assert stats["jobs_run"] == stats["spawns"] + 1
    assert stats["stolen_local"] + stats["stolen_wide"] == stats["jobs_given"]
    assert out["peers"] == int(config[1])
    if config[1] == "1":
        assert stats["steal_attempts_local"] == stats["steal_attempts_wide"] == 0


def test_json_has_the_documented_fields() -> None:
    out = run_json("fib", "22", "10", "--peers", "2")
    assert {"run_id", "plugin", "args", "result", "elapsed_s", "peers", "stats"} <= out.keys()
    assert out["plugin"] == "fib" and out["args"] == ["22", "10"] and out["result"] == 17711
    for name in stats.SUMMARY:  # the counters the summary prints (satind/stats.py)
        assert isinstance(out["stats"][name], int), name
    assert 0 < out["elapsed_s"] < RUN_TIMEOUT
    # The peers' own accounting: busy time on the run's jobs, at most what two peers had.
    busy = out["stats"]["busy_s"]
    assert 0 < busy <= 2 * out["elapsed_s"] * 1.01
    # (elapsed_s is rounded in the JSON, the efficiency was computed before)
    assert abs(out["efficiency"] - min(1.0, busy / (2 * out["elapsed_s"]))) < 0.002


def test_crs_steals_inside_the_cluster_and_rs_across(tmp_path: Path) -> None:
    # An emulated wide area (30 ms one way): CRS overlaps one wide-area request with local
    # steals, RS waits for each of its requests, about half of which cross.
    emu = tmp_path / "wide.toml"
    emu.write_text("[emulation]\nlatency_ms = 30.0\n")
    common = [
        "tree",
        "3",
        "6",
        "10",
        "sleep",
        "--peers",
        "4",
        "--clusters",
        "2",
        "--seed",
        "1",
        "--config",
        str(emu),
    ]
    crs = run_json(*common, "--steal", "crs")["stats"]
    rs = run_json(*common, "--steal", "rs")["stats"]
    assert crs["steal_attempts_local"] > 2 * crs["steal_attempts_wide"]
    assert rs["steal_attempts_wide"] > 0 and rs["stolen_wide"] > 0
    crs_share = crs["steal_attempts_wide"] / (
        crs["steal_attempts_wide"] + crs["steal_attempts_local"]
    )
    rs_share = rs["steal_attempts_wide"] / (rs["steal_attempts_wide"] + rs["steal_attempts_local"])
    assert crs_share < rs_share


def test_unknown_plugin_is_a_usage_error_listing_plugins() -> None:
    proc = satind("run", "fibonacci", "10")
    assert proc.returncode == 2
    assert "unknown plugin 'fibonacci'" in proc.stderr and "nqueens" in proc.stderr


def test_bad_arguments_print_the_plugins_usage() -> None:
    proc = satind("run", "nqueens", "many")
    assert proc.returncode == 2
    assert "N must be an integer" in proc.stderr
    assert "usage: satind run|submit nqueens N [DEPTH]" in proc.stderr
    proc = satind("run", "fib", "10", "--peers", "0")
    assert proc.returncode == 2 and "--peers" in proc.stderr
    proc = satind("run", "fib", "10", "--steal", "greedy")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_plugin_exception_exits_1_with_the_remote_traceback() -> None:
    proc = satind(
        "run", "explode", "3", "0", "--peers", "3", "--plugin-path", str(DATA / "plugins")
    )
    assert proc.returncode == 1, proc.stderr
    assert "ValueError: boom in a leaf" in proc.stderr
    assert "in explode" in proc.stderr  # the traceback of the peer where it was raised
    assert proc.stdout == ""


def test_jobs_whose_arguments_cannot_travel_run_where_spawned() -> None:
    out = run_json("opaque", "5", "4", "--peers", "3", "--plugin-path", str(DATA / "plugins"))
    assert out["result"] == 5 * 2**4
    # The root's arguments (two ints) travel: an idle peer may take it from the master's
    # queue before the master starts it. Nothing below it can travel: at most that one.
    assert out["stats"]["jobs_given"] == out["stats"]["stolen_local"] <= 1


def test_help_explains_the_run_options() -> None:
    proc = satind("run", "--help")
    assert proc.returncode == 0
    for option in ("--peers", "--clusters", "--steal", "--json", "--plugin-path"):
        assert option in proc.stdout


def _start_long_run(*extra: str) -> tuple[subprocess.Popen[str], list[int]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "satind",
            "run",
            "tree",
            "2",
            "2",
            "60000",
            "sleep",
            "--peers",
            "3",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A test run in the background of a shell inherits SIGINT ignored, and Python keeps
        # an inherited SIG_IGN: give the launcher the SIGINT a terminal would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 30
    peers: list[int] = []
    while time.monotonic() < deadline and len(peers) < 3:
        time.sleep(0.1)
        peers = peers_of(proc.pid)
    assert len(peers) == 3, "peers did not start"
    time.sleep(1.0)  # let the run get going
    return proc, peers


def _signal_masks(pid: int) -> str:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return " ".join(x for x in lines if x.startswith(("SigIgn", "SigCgt", "SigBlk", "State")))


def test_ctrl_c_stops_every_peer() -> None:
    proc, peers = _start_long_run()
    try:
        masks = _signal_masks(proc.pid)
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"no exit after SIGINT; before it: {masks}") from None
        assert proc.returncode == 130, err
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(alive(p) for p in peers):
            time.sleep(0.1)
        assert not any(alive(p) for p in peers)
    finally:
        proc.kill()
        kill_all(peers)


def test_peers_exit_when_the_launcher_is_killed() -> None:
    proc, peers = _start_long_run()
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        # Orphaned peers see end of file on their control pipe and stop on their own.
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(alive(p) for p in peers):
            time.sleep(0.1)
        assert not any(alive(p) for p in peers)
    finally:
        kill_all(peers)


def test_finished_run_leaves_no_process_behind() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "satind",
            "run",
            "tree",
            "2",
            "3",
            "300",
            "sleep",
            "--peers",
            "3",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: set[int] = set()
    try:
        while proc.poll() is None:
            seen.update(children_of(proc.pid))
            time.sleep(0.05)
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
        assert len(seen) >= 3
        assert not any(alive(p) for p in seen)
    finally:
        proc.kill()
        kill_all(list(seen))


def _python_blocks(markdown: str) -> list[str]:
    blocks: list[str] = []
    current: list[str] = []
    inside = False
    for line in markdown.splitlines():
        if line.startswith("```python"):
            inside, current = True, []
        elif line.startswith("```") and inside:
            inside = False
            blocks.append("\n".join(current) + "\n")
        elif inside:
            current.append(line)
    return blocks


def test_the_plugin_guide_example_runs(tmp_path: Path) -> None:
    docs = Path(__file__).parent.parent.parent / "docs" / "plugins.md"
    (tmp_path / "sumsq.py").write_text(_python_blocks(docs.read_text())[1])
    out = run_json("sumsq", "200000", "5000", "--peers", "2", "--plugin-path", str(tmp_path))
    assert out["result"] == sum(i * i for i in range(200000)) and out["check"] == "ok"


def test_the_speculative_search_example_of_the_guide_runs_and_aborts(tmp_path: Path) -> None:
    docs = Path(__file__).parent.parent.parent / "docs" / "plugins.md"
    blocks = [b for b in _python_blocks(docs.read_text()) if 'name="first"' in b]
    (tmp_path / "first.py").write_text(blocks[0])
    out = run_json("first", "3000000", "--peers", "2", "--plugin-path", str(tmp_path))
    assert out["result"] == 88484 and out["check"] == "ok"  # the check searches sequentially
    assert out["stats"]["aborts"] > 0


def test_the_readme_example_runs(tmp_path: Path) -> None:
    readme = Path(__file__).parent.parent.parent / "README.md"
    plugin = next(b for b in _python_blocks(readme.read_text()) if "PLUGIN = " in b)
    (tmp_path / "squares.py").write_text(plugin)
    out = run_json("squares", "100000", "--peers", "2", "--plugin-path", str(tmp_path))
    assert out["result"] == sum(i * i for i in range(100000))


def test_a_bad_config_file_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[steal]\nalgorithm_typo = 'rs'\n")
    proc = satind("run", "fib", "10", "--config", str(bad))
    assert proc.returncode == 2 and "unknown setting steal.algorithm_typo" in proc.stderr
    bad.write_text("[engine]\nswitch_interval_s = 'fast'\n")
    proc = satind("run", "fib", "10", "--config", str(bad))
    assert proc.returncode == 2 and "must be float" in proc.stderr


def test_wide_area_emulation_delays_only_traffic_between_clusters(tmp_path: Path) -> None:
    emu = tmp_path / "emu.toml"
    emu.write_text("[emulation]\nlatency_ms = 60.0\n")
    out = run_json(
        "tree",
        "3",
        "4",
        "5",
        "sleep",
        "--peers",
        "4",
        "--clusters",
        "2",
        "--steal",
        "crs",
        "--config",
        str(emu),
        "--seed",
        "2",
    )
    stats = out["stats"]
    slow = stats["steal_rtt_gt_100ms"]  # a wide-area round trip is at least 2 x 60 ms
    fast = sum(
        v for k, v in stats.items() if k.startswith("steal_rtt_le_") and k != "steal_rtt_le_100ms"
    )
    assert stats["steal_attempts_wide"] > 0 and slow > 0
    assert fast > 0  # local steals stay fast
    assert slow <= stats["steal_attempts_wide"]


def test_a_peer_busy_with_large_arguments_is_not_suspected(tmp_path: Path) -> None:
    # Fast failure detection: a network side that stops answering for 1.5 s is suspected.
    # Encoding `heavy`'s table of 600,000 rows takes 3 s here (satind's codec, one call): on
    # the network side (before), the master was suspected and could be taken for dead; off
    # it, the probes are answered. (A probe timeout of 1.5 s: at 0.3 s, and once at 0.8 s,
    # CI's loaded suite kept both peers' loops from answering in time, which is not what this
    # test is about; a stall of 3 s still lets a probe time out, checked by encoding on the
    # network side again: victim.SMALL_ARGS raised.)
    rows = 600_000
    config = tmp_path / "fast.toml"
    config.write_text(
        "[membership]\nprobe_interval_s = 2.0\nprobe_timeout_s = 1.5\nsuspicion_mult = 3\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "satind",
            "--log-level",
            "INFO",
            "run",
            "heavy",
            str(rows),
            "--peers",
            "2",
            "--config",
            str(config),
            "--plugin-path",
            str(DATA / "plugins"),
            "--json",
            "--no-check",  # checked here: the master's check decodes the table once more
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["result"] == sum(i * (i * 7 % 13) - i % 5 for i in range(rows))
    assert "suspecting" not in proc.stderr, [
        line for line in proc.stderr.splitlines() if "suspect" in line
    ]


def test_a_bad_log_level_is_a_usage_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "satind", "--log-level", "LOUD", "plugins"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "LOUD" in proc.stderr and "Traceback" not in proc.stderr


def test_a_weight_out_of_range_is_a_usage_error_before_any_connection(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # In this process (the parser is what is tested; four interpreters cost 25 s under load).
    for weight in ("0", "-2", "1e6", "heavy"):
        with pytest.raises(SystemExit) as exited:
            cli.main(["submit", "fib", "10", "--weight", weight])
        err = capsys.readouterr().err
        assert exited.value.code == 2, (weight, err)
        assert "--weight" in err and "Traceback" not in err, err
