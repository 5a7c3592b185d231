"""Rich live views: the progress of a run while ``satind run`` waits on a terminal."""

from __future__ import annotations

import trio
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from satind.config import Config
from satind.control import Client
from satind.net import messages as m


async def follow_run(
    client: Client, run_id: str, plugin: str, argv: list[str], cfg: Config
) -> m.RunResult:
    """Show a progress bar (fraction of the tree done, from job ids) until the run ends."""
    console = Console(stderr=True)
    result: list[m.RunResult] = []
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>5.1f}%"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[rate]}"),
        console=console,
        transient=True,
        refresh_per_second=4,
    ) as progress:
        task = progress.add_task(f"{plugin} {' '.join(argv)}", total=1.0, rate="")
        async with trio.open_nursery() as nursery:

            async def wait() -> None:
                result.append(await client.result(run_id))
                nursery.cancel_scope.cancel()

            nursery.start_soon(wait)
            started = trio.current_time()
            while True:
                reply = await client.progress(run_id, within_s=cfg.run.progress_poll_s * 4)
                if reply is not None and reply.progress >= 0:
                    elapsed = max(trio.current_time() - started, 1e-9)
                    jobs = reply.counters.get("jobs_run", 0)
                    steals = reply.counters.get("stolen_local", 0) + reply.counters.get(
                        "stolen_wide", 0
                    )
                    progress.update(
                        task,
                        completed=reply.progress,
                        rate=f"{jobs / elapsed:,.0f} jobs/s · {steals / elapsed:,.1f} steals/s",
                    )
                await trio.sleep(cfg.run.progress_poll_s)
    return result[0]
