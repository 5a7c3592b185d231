"""SPMD runs mastered by different peers at once, on two real daemons (issue 28, point 7).

Every SPMD run spreads its entities over every member, so each master's peer holds entities
of the runs the others master while its own compute thread runs the root of its run. Two
heat2d runs submitted at once to a/0 and b/0 never ended: each root waited for entity jobs
queued on the other peer, behind the other root (docs/spmd.md "Runs beside runs"). Here two
and three runs with different masters end exact, and a wrong SPMD plugin — its step raises,
its ``ghost`` raises, its step returns what cannot travel, one of its steps is slow — mastered
on one daemon fails with a message that says what went wrong (or, slow, ends exact), while a
good heat2d mastered on the other daemon ends exact beside it.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_daemon import Daemon, client_in_background, satind, status, wait_for
from tests.integration.test_recovery_procs import FAST

pytestmark = pytest.mark.slow

# A small SPMD plugin (docs/plugins.md "SPMD applications") that goes wrong the way MODE says,
# at entity 1 only: "step" raises at iteration 2, "ghost" raises as soon as it is asked (at
# placement), "lambda" makes a state that cannot travel, "slow" spends SLOW_S of wall time in
# one step. Its check recomputes the run without satind.
WRONG = """
import time

from satind import UsageError, spmd_plugin

MODE = {mode!r}
SLOW_S = {slow_s!r}
P = 1_000_003


def parse(argv):
    if len(argv) != 2:
        raise UsageError("give ENTITIES ITERATIONS")
    return tuple(int(a) for a in argv)


def neighbours(args, e):
    return [n for n in (e - 1, e + 1) if 0 <= n < args[0]]


def initial(args, e):
    return [e + 1]


def ghost(args, e, state, n):
    if MODE == "ghost" and e == 1:
        raise ValueError("the ghost of entity 1 is broken")
    return state[0]


def next_state(state, ghosts, iteration):
    return [(3 * state[0] + sum(ghosts[n] for n in sorted(ghosts)) + iteration) % P]


def step(args, e, state, ghosts, iteration):
    if e == 1 and MODE == "step" and iteration == 2:
        raise ValueError("the step of entity 1 is broken at iteration 2")
    if e == 1 and MODE == "lambda":
        return lambda: state
    if e == 1 and MODE == "slow" and iteration == 1:
        deadline = time.perf_counter() + SLOW_S
        while time.perf_counter() < deadline:  # the CPU, as a long step holds it
            pass
    return next_state(state, ghosts, iteration)


def check(args, values):
    states = [initial(args, e) for e in range(args[0])]
    for it in range(args[1]):
        ghosts = [{{n: states[n][0] for n in neighbours(args, e)}} for e in range(args[0])]
        states = [next_state(states[e], ghosts[e], it) for e in range(args[0])]
    if values != [s[0] for s in states]:
        raise AssertionError("not the sequential answer")


PLUGIN = spmd_plugin(
    {name!r},
    usage={name!r} + " ENTITIES ITERATIONS",
    parse=parse,
    entities=lambda args: args[0],
    neighbours=neighbours,
    iterations=lambda args: args[1],
    initial=initial,
    ghost=ghost,
    step=step,
    gather=lambda args, states: [s[0] for s in states],
    check=check,
)
"""
SLOW_S = 2.0
# A heat2d run of a second or more (its time is mostly the holders' ghost exchanges and the
# master's round trips, one per push): long enough to be under way when another client's
# submission comes (each client is a new process). The tests check from the masters' logs
# that the runs did overlap.
GOOD = ["heat2d", "32", "32", "1200", "4"]


@pytest.fixture(scope="module")
def daemons(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Daemon, Daemon]]:
    keys = tmp_path_factory.mktemp("spmd-masters")
    assert satind("keys", "init", str(keys)).returncode == 0
    for name in ("m1", "m2"):
        assert satind("keys", "issue", str(keys), name).returncode == 0
    plugins = keys / "plugins"
    plugins.mkdir()
    for mode in ("step", "ghost", "lambda", "slow"):
        name = f"wrong_{mode}"
        (plugins / f"{name}.py").write_text(WRONG.format(mode=mode, slow_s=SLOW_S, name=name))
    config = keys / "fast.toml"
    config.write_text(FAST)
    opts = ["--config", str(config), "--plugin-path", str(plugins)]
    m1 = Daemon(keys, "m1", "east", "", *opts)
    m2: Daemon | None = None
    try:
        m2 = Daemon(keys, "m2", "west", m1.first, *opts)
        wait_for(lambda: [p["state"] for p in status(keys, m1.first)["peers"]].count("alive") == 4)
        yield keys, m1, m2
    finally:
        m1.kill()
        if m2 is not None:
            m2.kill()


# Clients the running test started: the ones a failed test left waiting are killed after it.
_CLIENTS: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_client_left() -> Iterator[None]:
    yield
    while _CLIENTS:
        proc = _CLIENTS.pop()
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


@dataclass
class Run:
    """A run submitted by a client left running (``submit --wait --json``)."""

    proc: subprocess.Popen[str]
    master: Daemon
    run_id: str = ""
    err: str = ""


def _submit(master: Daemon, peer: str, argv: list[str]) -> Run:
    keys = master.log.parent
    proc = client_in_background(keys, master.addresses[peer], "submit", *argv, "--wait", "--json")
    _CLIENTS.append(proc)
    return Run(proc, master)


def _submitted(run: Run) -> Run:
    """Wait for the client's "satind: run RUN_ID submitted" line."""
    assert run.proc.stderr is not None
    line = run.proc.stderr.readline()
    assert "submitted" in line, line
    run.run_id, run.err = line.split()[2], line
    return run


def _outcome(run: Run, timeout: float = 60) -> tuple[int, Any, str]:
    """The client's exit code, its JSON answer (None when it printed none) and its stderr."""
    try:
        out, err = run.proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        run.proc.kill()
        out, err = run.proc.communicate()
        raise AssertionError(f"the run did not end within {timeout:g} s: {run.err}{err}") from None
    run.err += err
    if not run.run_id:
        _, _, rest = run.err.partition("satind: run ")
        run.run_id = rest.split(" ", 1)[0]
    return run.proc.returncode, json.loads(out) if out.strip() else None, run.err


def _exact(run: Run) -> dict[str, Any]:
    code, result, err = _outcome(run)
    assert code == 0, err
    assert result["check"] == "ok", result
    out: dict[str, Any] = result
    return out


_STAMP = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \S+ \w+ satind\.core\.(?:master|start): run "


def _span(run: Run) -> tuple[datetime, datetime]:
    """When the run started and ended, by its master's log. The master logs a run's end after
    it has sent the answer: the client may have it before the line is in the log."""
    rid = re.escape(run.run_id)
    deadline = time.monotonic() + 10
    while True:
        text = run.master.log.read_text()
        start = re.search(_STAMP + rid + ": ", text, re.MULTILINE)
        end = re.search(_STAMP + rid + " (done|failed) in ", text, re.MULTILINE)
        if (start is not None and end is not None) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert start is not None and end is not None, f"run {run.run_id} not in {run.master.log}"
    return (
        datetime.strptime(start.group(1), "%Y-%m-%d %H:%M:%S,%f"),
        datetime.strptime(end.group(1), "%Y-%m-%d %H:%M:%S,%f"),
    )


def _overlapped(runs: list[Run]) -> None:
    """Every run was under way at one moment (else the test proves nothing: make them longer)."""
    spans = [_span(run) for run in runs]
    assert max(s for s, _ in spans) < min(e for _, e in spans), f"no overlap: {spans}"


def test_two_and_three_spmd_runs_with_different_masters_end_exact(
    daemons: tuple[Path, Daemon, Daemon],
) -> None:
    _, m1, m2 = daemons
    # Two at once, mastered by the first peer of each machine.
    # Submitted at once, they overlap without the long run the tests below need.
    short = [*GOOD[:3], "400", GOOD[4]]
    runs = [_submit(m1, "m1/0", short), _submit(m2, "m2/0", short)]
    results = [_exact(run) for run in runs]
    assert results[0]["result"] == results[1]["result"]  # the same plate, wherever it ran
    _overlapped(runs)
    # Three at once, mastered by three different peers, each run of its own size.
    sizes = [["heat2d", "30", "24", "380", "4"], ["heat2d", "24", "24", "420", "5"], short]
    masters = [(m1, "m1/0"), (m2, "m2/0"), (m1, "m1/1")]
    runs = [_submit(d, peer, argv) for (d, peer), argv in zip(masters, sizes, strict=True)]
    for run in runs:
        _exact(run)
    _overlapped(runs)


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("step", "the step of entity 1 is broken at iteration 2"),
        ("ghost", "the ghost of entity 1 is broken"),
        ("lambda", "step() of entity 1 (iteration 0) returned what cannot travel"),
    ],
)
def test_a_wrong_spmd_plugin_fails_and_a_good_run_mastered_elsewhere_ends_exact(
    daemons: tuple[Path, Daemon, Daemon], mode: str, says: str
) -> None:
    _, m1, m2 = daemons
    good = _submitted(_submit(m2, "m2/0", GOOD))  # under way before the wrong one comes
    wrong = _submit(m1, "m1/0", [f"wrong_{mode}", "4", "30"])
    code, result, err = _outcome(wrong)
    assert code != 0 and result is None, err
    assert " failed: " in err and says in err, err  # the client says why, with the traceback
    _exact(good)
    _overlapped([good, wrong])


def test_a_slow_step_delays_a_good_run_mastered_elsewhere_and_both_end_exact(
    daemons: tuple[Path, Daemon, Daemon],
) -> None:
    _, m1, m2 = daemons
    good = _submitted(_submit(m2, "m2/0", GOOD))
    slow = _submit(m1, "m1/0", ["wrong_slow", "4", "6"])
    result = _exact(slow)
    assert result["elapsed_s"] >= SLOW_S
    _exact(good)
    _overlapped([good, slow])
