"""What the benchmark scripts share about plots: they need matplotlib (the ``bench`` extra,
pip install -e '.[bench]'); without it a script prints its tables, which are the result, and
says why there is no plot."""

from __future__ import annotations


def has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("\n(no plot: matplotlib is not installed; pip install -e '.[bench]')")
        return False
    return True
