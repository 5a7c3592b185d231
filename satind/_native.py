"""Which of the engine's hot modules run compiled, and a guard against stale compiled ones.

setup.py compiles the hot path with mypyc and records the sha256 of each source it compiled in
``_built.txt``. After an editable install (``pip install -e .``) the compiled modules sit next
to their sources and Python imports them first, so an edited source would silently not run:
``check`` refuses that at import, with what to do.
"""

from __future__ import annotations

import hashlib
import importlib.util
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_BUILT = _PACKAGE / "_built.txt"


def _module(source: str) -> str:
    """``satind/engine/worker.py`` -> ``satind.engine.worker``."""
    return source.removesuffix(".py").replace("/", ".")


def compiled() -> list[str]:
    """The modules of the hot path that run compiled here (empty: pure Python)."""
    if not _BUILT.exists():
        return []
    out = []
    for line in _BUILT.read_text().splitlines():
        name = _module(line.split()[0])
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        if origin is not None and origin.endswith(tuple(EXTENSION_SUFFIXES)):
            out.append(name)
    return out


def check() -> None:
    """Raise ImportError if a compiled module's source changed after it was compiled.

    Raises:
        ImportError: a stale compiled module would shadow its edited source.
    """
    if not _BUILT.exists():
        return
    root = _PACKAGE.parent
    compiled_now = set(compiled())
    for line in _BUILT.read_text().splitlines():
        source, digest = line.split()
        path = root / source
        if _module(source) not in compiled_now or not path.exists():
            continue
        if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            raise ImportError(
                f"{source} changed after it was compiled, and the compiled module would run "
                "instead of it: install again (`pip install -e .`), or install pure Python "
                "(`SATIND_PURE_PYTHON=1 pip install -e .`)"
            )


check()  # on import: satind/__init__.py imports this module before the hot path
