"""Iterative master-worker applications (scheduling-iterative-apps-volatile-resources): each
iteration is a set of independent tasks and a barrier. A plugin describes one with
``iterative_plugin`` — the initial state, the tasks of an iteration, the task function, how
the results combine into the next state, and when to stop — and satind runs it: the run's
root (``drive``) pushes each iteration's tasks to the master's scheduler, which places them
on workers with the run's heuristic (core/iterative.py); at each barrier the state goes to
every member, so a new master resumes from the last barrier. See docs/plugins.md.

The answer must not depend on the schedule: ``combine`` gets the results in task order,
whichever worker computed them, and a task must be a function of its input alone.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from satind.api import spawnable, sync
from satind.engine import worker as _worker
from satind.net.codec import decode_value, encode_value
from satind.plugin import Plugin, driven
from satind.work.reports import BarrierPassed


@dataclass(frozen=True)
class IterativeApp:
    """What ``drive`` and ``run_task`` call (see ``iterative_plugin``)."""

    initial: Callable[[Any], Any]
    tasks: Callable[[Any, Any, int], Sequence[Any]]
    task: Callable[[Any, Any], Any]
    combine: Callable[[Any, Any, list[Any], int], Any]
    done: Callable[[Any, Any, int], bool]


# Iterative applications by plugin name: filled when their module is imported, on every peer.
APPS: dict[str, IterativeApp] = {}


def iterative_plugin(
    name: str,
    *,
    usage: str,
    parse: Callable[[Sequence[str]], Any],
    initial: Callable[[Any], Any],
    tasks: Callable[[Any, Any, int], Sequence[Any]],
    task: Callable[[Any, Any], Any],
    combine: Callable[[Any, Any, list[Any], int], Any],
    done: Callable[[Any, Any, int], bool],
    check: Callable[[Any, Any], None] | None = None,
    report: Callable[[Sequence[str], Any], Any] | None = None,
    description: str = "",
) -> Plugin:
    """Describe an iterative application; the result is the module's ``PLUGIN``.

    Args:
        name: what users type after ``satind run``.
        usage: the argument synopsis.
        parse: command-line arguments -> the application's arguments (one value, passed to
            every function below as ``args``); raises ``UsageError``.
        initial: ``initial(args)`` -> the state before the first iteration.
        tasks: ``tasks(args, state, iteration)`` -> the inputs of that iteration's tasks.
        task: ``task(args, input)`` -> a task's result; runs on the workers, so a function of
            its input alone.
        combine: ``combine(args, state, results, iteration)`` -> the next state; ``results``
            in the order of ``tasks``.
        done: ``done(args, state, iterations)`` -> whether to stop, before each iteration.
        check: optional ``check(args, final_state)``; raises when the answer is wrong.
        report: optional ``report(argv, final_state)`` -> what users see.
        description: one line for ``satind plugins``.
    """
    APPS[name] = IterativeApp(initial, tasks, task, combine, done)
    # Discovery takes a plugin from the module that defines it: the caller's.
    home = sys._getframe(1).f_globals.get("__name__", "")
    return driven(name, drive, usage, parse, check, report, description, home, "iterative")


@spawnable
def run_task(name: str, args: Any, item: Any) -> Any:
    """One task, on a worker."""
    return APPS[name].task(args, item)


@spawnable
def drive(name: str, args: Any) -> Any:
    """The root of an iterative run: iteration after iteration, push the tasks, wait at the
    barrier, combine; from the last barrier when a new master runs it again."""
    app = APPS[name]
    w = _worker.CURRENT
    run_id = w.current.run.run_id if w is not None else ""
    saved = w.current.run.resume_from if w is not None else None
    if w is not None and saved is not None:
        # A new master: from the last barrier. The tasks spawned before it are counted as
        # spawned, so that every task keeps its path (its place in the run) across masters.
        iteration, state, w.current.nspawn = decode_value(saved)
    else:
        iteration, state = 0, app.initial(args)
    while not app.done(args, state, iteration):
        handles = [run_task.push(name, args, item) for item in app.tasks(args, state, iteration)]
        sync()
        state = app.combine(args, state, [h.result() for h in handles], iteration)
        iteration += 1
        if w is not None:
            barrier = encode_value([iteration, state, w.current.nspawn])
            w.hooks.report(BarrierPassed(run_id, iteration, barrier))
    return state
