"""The systems satind is compared with, each driving a workload spec (workloads.py) the way
its documentation recommends for recursive work, on ``workers`` worker processes:

- Ray: nested remote tasks; a task spawns its children as remote tasks and ``ray.get``s them
  (Ray releases the blocked task's CPU meanwhile).
- Dask distributed: tasks launched from tasks through ``worker_client`` (which secedes from
  the worker's thread pool while it waits and rejoins after), on a LocalCluster of processes.
- A process pool (concurrent.futures): the parent expands the tree breadth-first to a few
  subtrees per worker and farms them out; it combines the results itself.
- Sequential: the whole spec in one fresh worker process.

Each system has ``start`` (timed separately: start-up is not part of a run's time),
``solve(workload)`` and ``stop``. This module must be importable by the systems' worker
processes (compare.py puts benchmarks/ on PYTHONPATH before starting them).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
from typing import Any

from workloads import SPECS, Task, Workload, expand, fold, solve_seq

# -- Ray ---------------------------------------------------------------------------------------


def _ray_solve(spec: str, params: Any, task: Task) -> Any:
    import ray

    split, leaf, combine = SPECS[spec]
    children = split(params, task)
    if children is None:
        return leaf(params, task)
    refs = [ray_solve.remote(spec, params, c) for c in children]
    return combine(params, task, ray.get(refs))


try:  # the bench extra; tests never need it
    import ray as _ray

    ray_solve = _ray.remote(_ray_solve)
except ImportError:  # pragma: no cover
    ray_solve = None


class Ray:
    name = "ray"

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def start(self) -> None:
        import ray

        ray.init(
            num_cpus=self.workers,
            include_dashboard=False,
            log_to_driver=False,
            logging_level="ERROR",
        )
        assert ray_solve is not None
        ray.get(ray_solve.remote("fib", 2, (3,)))  # workers up and this module imported

    def solve(self, w: Workload) -> Any:
        import ray

        assert ray_solve is not None
        return ray.get(ray_solve.remote(w.spec, w.params, w.root))

    def stop(self) -> None:
        import ray

        ray.shutdown()


# -- Dask distributed --------------------------------------------------------------------------


def dask_solve(spec: str, params: Any, task: Task) -> Any:
    from distributed import worker_client

    split, leaf, combine = SPECS[spec]
    children = split(params, task)
    if children is None:
        return leaf(params, task)
    with worker_client() as client:  # secedes while it waits, rejoins after
        futures = [client.submit(dask_solve, spec, params, c, pure=False) for c in children]
        results = client.gather(futures)
    return combine(params, task, results)


class Dask:
    name = "dask"

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.cluster: Any = None
        self.client: Any = None

    def start(self) -> None:
        from distributed import Client, LocalCluster

        self.cluster = LocalCluster(
            n_workers=self.workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=50,
        )
        self.client = Client(self.cluster)
        self.client.submit(dask_solve, "fib", 2, (3,), pure=False).result()

    def solve(self, w: Workload) -> Any:
        return self.client.submit(dask_solve, w.spec, w.params, w.root, pure=False).result()

    def stop(self) -> None:
        self.client.close()
        self.cluster.close()


# -- a process pool ----------------------------------------------------------------------------


def _pool_part(spec: str, params: Any, task: Task) -> tuple[Task, Any]:
    return task, solve_seq(spec, params, task)


def _own_session() -> None:
    """A pool worker in a session of its own, as each satind peer is (ops/launcher.py): where
    the kernel shares a CPU by session (autogroups), both systems then get the same share of
    a loaded machine."""
    os.setsid()


class Pool:
    name = "process pool"
    # Subtrees per worker: enough to balance uneven subtrees, few enough to cost little.
    per_worker = 8

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool: concurrent.futures.ProcessPoolExecutor | None = None

    def start(self) -> None:
        self.pool = concurrent.futures.ProcessPoolExecutor(
            self.workers,
            mp_context=multiprocessing.get_context("forkserver"),
            initializer=_own_session,
        )
        # Start every worker now (the pool starts them lazily) and import this module there.
        list(
            self.pool.map(
                solve_seq, ["fib"] * self.workers, [2] * self.workers, [(3,)] * self.workers
            )
        )

    def solve(self, w: Workload) -> Any:
        assert self.pool is not None
        parts = expand(w.spec, w.params, w.root, self.per_worker * self.workers)
        futures = [self.pool.submit(_pool_part, w.spec, w.params, t) for t in parts]
        done = dict(f.result() for f in futures)
        return fold(w.spec, w.params, w.root, done)

    def stop(self) -> None:
        assert self.pool is not None
        self.pool.shutdown()


class Sequential(Pool):
    """The spec in one fresh worker process, whole: plain sequential Python. Not in this
    process, whose heap (Ray, Dask, matplotlib imported) makes CPython's GC slower."""

    name = "sequential"

    def __init__(self, workers: int) -> None:
        super().__init__(1)

    def solve(self, w: Workload) -> Any:
        assert self.pool is not None
        return self.pool.submit(solve_seq, w.spec, w.params, w.root).result()


SYSTEMS = {"ray": Ray, "dask": Dask, "pool": Pool, "sequential": Sequential}
