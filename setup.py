"""Build: the engine's hot path compiled with mypyc where this machine can, pure Python otherwise.

Everything else about the package is in pyproject.toml. The modules in ``HOT`` are what every
spawn and sync runs through (docs/benchmarks.md, issue 18: spawn+sync 4x faster compiled), and
the volatile-workers study's simulator (satind/volatile: 1.8x faster compiled, the same
makespans; issue 34).
They are plain, strictly typed Python that mypyc turns into C extensions; their ``.py`` files
stay in the package, and run as they are when nothing was compiled:

* ``SATIND_PURE_PYTHON=1`` at install time builds nothing (for a machine without a C compiler,
  or to debug the engine with Python's tools);
* a module that fails to compile is skipped (``optional``): the install still succeeds.

With ``pip install -e .`` the compiled modules sit next to their sources and Python imports
them first: after editing a module of ``HOT``, install again (or install with
``SATIND_PURE_PYTHON=1``). ``satind/_native.py`` refuses to import a compiled module whose source
has changed since (it would silently run the old code).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from setuptools import setup  # type: ignore[import-untyped]

HOT = [
    "satind/work/jobs.py",
    "satind/work/events.py",
    "satind/engine/frames.py",
    "satind/work/workqueue.py",
    "satind/engine/worker_base.py",
    "satind/engine/worker.py",
    "satind/api.py",
    "satind/volatile/model.py",
    "satind/volatile/heuristics.py",
    "satind/volatile/slots.py",
]
# What the compiled modules were built from (sha256 of each source), read by satind/_native.py.
BUILT = Path("satind/_built.txt")


def _remove_stale() -> None:
    """Compiled modules left in the tree by an earlier editable install would shadow the
    sources of a pure build."""
    for source in HOT:
        for stale in Path(source).parent.glob(Path(source).stem + ".cpython-*.so"):
            stale.unlink()
    BUILT.unlink(missing_ok=True)


def ext_modules() -> list[object]:
    if os.environ.get("SATIND_PURE_PYTHON"):
        _remove_stale()
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("satind: mypyc not found, installing pure Python", file=sys.stderr)
        _remove_stale()
        return []
    # Third-party packages may be absent from the isolated build environment: their types
    # are not needed to compile the hot path.
    # pyproject's [tool.mypy] (strict, for development) is not read: with those packages
    # absent their values are Any, which strict checking rejects (``mypy --strict`` in
    # development checks the same code with them present).
    flags = ["--config-file", os.devnull, "--ignore-missing-imports"]
    try:
        extensions = mypycify([*HOT, *flags], opt_level="3")
    except SystemExit as failed:  # mypyc exits on a type error it cannot compile past
        print(f"satind: mypyc failed ({failed}), installing pure Python", file=sys.stderr)
        _remove_stale()
        return []
    for extension in extensions:
        extension.optional = True  # a module that does not compile runs as Python
    BUILT.write_text(
        "".join(f"{src} {hashlib.sha256(Path(src).read_bytes()).hexdigest()}\n" for src in HOT)
    )
    return list(extensions)


setup(ext_modules=ext_modules())
