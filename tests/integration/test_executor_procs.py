"""satind.Executor and the futures functions on real local peers (client/executor.py,
client/futures.py), as a user's script meets them: run as `python SCRIPT` from a directory
of its own, its functions shipped. (docs/client.md's examples run them against daemons.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = """
import concurrent.futures
import time

import satind


def square(x, delay=0.0):
    time.sleep(delay)
    if x < 0:
        raise ValueError(f"negative {x}")
    return x * x


def main():
    with satind.Executor(local=True, peers=2) as ex:
        try:
            ex.submit(lambda x: x, 1)
        except TypeError as exc:
            print("lambda refused:", "top level of a module" in str(exc))
        try:
            ex.submit(square, object())
        except satind.BadArguments as exc:
            print("object refused:", "cannot be sent" in str(exc))
        try:
            ex.submit(square, -1).result()
        except ValueError as exc:
            print("raised:", repr(exc))
        futures = [ex.submit(square, i, delay=0.2) for i in range(4)]
        pool = concurrent.futures.as_completed(futures)
        print("pool as_completed:", sorted(f.result() for f in pool))
        runs = [f.run for f in futures]
        ended = satind.as_completed(runs, timeout=120)
        print("as_completed:", sorted(run.result() for run in ended))
        done, not_done = satind.wait(runs, return_when=satind.FIRST_COMPLETED)
        print("wait:", len(done), len(not_done))
        print("gather:", ex.cluster.gather(runs))
        seen = []
        runs[1].add_done_callback(lambda run: seen.append(run.result()))
        print("callback:", seen, runs[1].done())
        print("map:", list(ex.map(square, range(7), chunksize=2)))
        print("map of two:", list(ex.map(pow, [2, 3], [5, 2])))
        try:
            list(ex.map(square, [1, -2, 3]))
        except ValueError as exc:
            print("map raised:", exc)
        slow = ex.submit(square, 5, delay=60)
        print("cancelled:", slow.cancel(), slow.cancelled())
    try:
        ex.submit(square, 1)
    except RuntimeError as exc:
        print("after shutdown:", exc)


if __name__ == "__main__":
    main()
"""

EXPECTED = """lambda refused: True
object refused: True
raised: ValueError('negative -1')
pool as_completed: [0, 1, 4, 9]
as_completed: [0, 1, 4, 9]
wait: 4 0
gather: [0, 1, 4, 9]
callback: [1] True
map: [0, 1, 4, 9, 16, 25, 36]
map of two: [32, 9]
map raised: negative -2
cancelled: True True
after shutdown: cannot schedule new futures after shutdown
"""


def test_an_executor_on_local_peers_behaves_as_a_process_pool(tmp_path: Path) -> None:
    (tmp_path / "work.py").write_text(SCRIPT)
    proc = subprocess.run(
        [sys.executable, "work.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == EXPECTED, proc.stderr


def test_an_executor_started_at_a_scripts_top_level_refuses_on_the_peers(tmp_path: Path) -> None:
    # No `if __name__ == "__main__":`: the peers import the script, whose top level starts
    # another Executor there; it refuses, the vetting fails, and the run says why.
    (tmp_path / "bad.py").write_text(
        "import satind\n\n\ndef one():\n    return 1\n\n\n"
        "if not satind.__name__.startswith('x'):\n"
        "    with satind.Executor(local=True, peers=1) as ex:\n"
        "        print(ex.submit(one).result())\n"
    )
    proc = subprocess.run(
        [sys.executable, "bad.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode != 0
    assert 'if __name__ == "__main__":' in proc.stderr, proc.stderr[-3000:]
