"""fib N [THRESHOLD]: the n-th Fibonacci number, spawning every call with n >= THRESHOLD.

Calls below the threshold run as plain sequential recursion: the grain size knob. The default
threshold, 20, makes a leaf about 1-2 ms of CPython work, so spawn overhead is well under 1%.
"""

from __future__ import annotations

from collections.abc import Sequence

from satind import Plugin, spawnable, sync

from ._args import at_most, int_arg

DEFAULT_THRESHOLD = 20


def fib_seq(n: int) -> int:
    """Plain doubly recursive Fibonacci: the leaf work."""
    if n < 2:
        return n
    return fib_seq(n - 1) + fib_seq(n - 2)


@spawnable
def fib(n: int, threshold: int = DEFAULT_THRESHOLD) -> int:
    if n < max(threshold, 2):
        return fib_seq(n)
    a = fib.spawn(n - 1, threshold)
    b = fib.spawn(n - 2, threshold)
    sync()
    return a.result() + b.result()


def parse(argv: Sequence[str]) -> tuple[int, int]:
    at_most(argv, 2)
    n = int_arg(argv, 0, "N", low=0, high=100)
    threshold = int_arg(argv, 1, "THRESHOLD", low=0, high=100, default=DEFAULT_THRESHOLD)
    return n, threshold


def check(args: tuple[int, ...], result: int) -> None:
    """Independent check: the closed-form-free iterative Fibonacci."""
    a, b = 0, 1
    for _ in range(args[0]):
        a, b = b, a + b
    if result != a:
        raise AssertionError(f"fib({args[0]}) is {a}, not {result}")


def benchmark() -> None:
    """A leaf's work at a small size (fib 22: ~2 ms), for self-adaptivity's speed."""
    fib_seq(22)


PLUGIN = Plugin(
    name="fib",
    entry=fib,
    usage="fib N [THRESHOLD]",
    parse=parse,
    max_branching=2,
    check=check,
    description="n-th Fibonacci number by doubly recursive spawning",
    benchmark=benchmark,
)
