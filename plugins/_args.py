"""Argument parsing helpers shared by the built-in plugins."""

from __future__ import annotations

from collections.abc import Sequence

from satind import UsageError


def int_arg(
    argv: Sequence[str], index: int, name: str, *, low: int, high: int, default: int | None = None
) -> int:
    """The ``index``-th argument as an int in [low, high], or ``default`` when absent."""
    if index >= len(argv):
        if default is None:
            raise UsageError(f"missing {name}")
        return default
    try:
        value = int(argv[index])
    except ValueError:
        raise UsageError(f"{name} must be an integer, got {argv[index]!r}") from None
    if not low <= value <= high:
        raise UsageError(f"{name} must be between {low} and {high}, got {value}")
    return value


def at_most(argv: Sequence[str], count: int) -> None:
    if len(argv) > count:
        raise UsageError(f"too many arguments: {' '.join(argv[count:])}")
