"""Python values beyond strings through the client API on real local peers: a NumPy array
goes to a run and a NumPy result comes back (when NumPy is installed: it is not one of
satind's dependencies, and CI does not install it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numpy")

PLUGIN = '''
import numpy as np

import satind


@satind.spawnable
def total(values: np.ndarray) -> np.ndarray:
    """The sum of an array, in halves, as a one-element array (a NumPy result)."""
    if len(values) <= 1000:
        return np.array([values.sum()])
    half = len(values) // 2
    a, b = total.spawn(values[:half]), total.spawn(values[half:])
    satind.sync()
    return a.result() + b.result()


PLUGIN = satind.Plugin(
    name="arrays", entry=total, usage="arrays", parse=lambda argv: (np.arange(10),)
)
'''

SCRIPT = """
import numpy as np
import satind
from arrays import total

got = satind.run_local(total, np.arange(100_000, dtype=np.int64), peers=2)
assert isinstance(got, np.ndarray) and got.tolist() == [sum(range(100_000))], got
print("ok")
"""


def test_an_array_goes_in_and_an_array_comes_out(tmp_path: Path) -> None:
    (tmp_path / "arrays.py").write_text(PLUGIN)
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=tmp_path, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0 and proc.stdout == "ok\n", proc.stderr
