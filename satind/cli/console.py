"""Rich views: the status table, the live console, and `satind run`'s progress bar.

A divide-and-conquer run's progress is the fraction of its tree that is done, estimated from
job ids: every job owns a share of its parent's work (1 / the plugin's maximum branching
factor), and a finished job credits what its children did not take. An iterative or SPMD
run's is its iterations: each iteration's jobs are new children of the root, so its tree
looks done after the first; the bar counts iterations instead (of how many it makes, when the
plugin says beforehand).
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Callable
from dataclasses import dataclass

import trio
from rich.console import Console, Group
from rich.live import Live
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from satind import stats
from satind.client.client import Client, PeerUnavailable, RequestFailed, connect
from satind.config import Config
from satind.net import messages as m
from satind.net.names import slot_of
from satind.net.parties import parse_address

STATE_STYLE = {
    "alive": "green",
    "suspect": "yellow",
    "draining": "cyan",
    "reclaimed": "magenta",
    "dead": "red",
    "left": "dim",
}


# The columns of the peers table that fit 80 columns (`status --watch` on a narrow terminal).
NARROW = ("peer", "state", "queue", "jobs run", "stolen local", "stolen wide", "CPU%", "RSS MB")


def peers_table(reply: m.StatusReply, narrow: bool = False) -> Table:
    table = Table(title="peers", title_justify="left", expand=False)
    columns = (
        "peer",
        "cluster",
        "state",
        "queue",
        "jobs run",
        "given",
        "stolen local",
        "stolen wide",
        "attempts l/w",
        "CPU%",
        "RSS MB",
        "checkpoint",
        "up %",
        "entities",
    )
    shown = [c for c in columns if not narrow or c in NARROW]
    # A peer's name is never cut ("node-…" tells nothing): the other columns give way.
    widest = max((len(slot_of(p.name)) for p in reply.peers), default=4)
    for column in shown:
        table.add_column(
            column,
            justify="left" if column in ("peer", "cluster", "state") else "right",
            min_width=widest if column == "peer" else None,
            no_wrap=column == "peer",
        )
    for p in reply.peers:
        known = p.state not in ("dead", "left") and p.rss_mb > 0
        cells: dict[str, str | Text] = {
            "peer": slot_of(p.name),  # one row per slot: the process there now
            "cluster": p.cluster,
            "state": Text(p.state, style=STATE_STYLE.get(p.state, "")),
        }
        values = [
            str(p.queue),
            f"{p.jobs_run:,}",
            f"{p.jobs_given:,}",
            f"{p.stolen_local:,}",
            f"{p.stolen_wide:,}",
            f"{p.steal_attempts_local:,}/{p.steal_attempts_wide:,}",
            f"{p.cpu_percent:.0f}",
            f"{p.rss_mb:.0f}",
            _checkpoint_cell(p),
            "?" if p.availability < 0 else f"{100 * p.availability:.0f}",
            str(p.entities) if p.entities else "-",
        ]
        for column, value in zip(columns[3:], values, strict=True):
            cells[column] = value if known else "-"
        table.add_row(*(cells[c] for c in shown))
    return table


def _checkpoint_cell(p: m.PeerStatus) -> str:
    """Policy, bytes written and age of the last checkpoint; "off" without checkpoints."""
    if not p.checkpoint_policy:
        return "off"
    age = "none yet" if p.checkpoint_age_s < 0 else f"{p.checkpoint_age_s:.0f} s ago"
    return f"{p.checkpoint_policy} {p.checkpoint_bytes / 1e6:.1f} MB, {age}"


# Terminals narrower than this get the tables' narrow forms (NARROW, NARROW_RUNS): fourteen
# columns on 80 made every header and cell "a…".
TABLES_WIDE = 140
# The columns of the runs table that fit 80 columns (the others are `satind status --json`'s
# and a wider terminal's).
NARROW_RUNS = ("run", "plugin", "state", "done", "elapsed s")


def runs_table(reply: m.StatusReply, narrow: bool = False) -> Table:
    table = Table(title="runs", title_justify="left")
    columns = (
        "run",
        "plugin",
        "master",
        "state",
        "done",
        "elapsed s",
        "jobs",
        "iteration",
        "moves",
    )
    recovery = ("jobs_restarted", "results_reused", "leaves_redone", "orphan_table_size")
    # A run id is what the operator copies into the next command: never cut; a long argument
    # list folds instead.
    widest = max((len(r.run_id) for r in reply.runs), default=3)
    every = (*columns, "restarted", "reused", "redone", "orphans")
    shown = [c for c in every if not narrow or c in NARROW_RUNS]
    for column in shown:
        if column == "run":
            table.add_column(column, min_width=widest, no_wrap=True)
        elif column == "plugin":
            table.add_column(column, overflow="fold")
        else:
            table.add_column(column)
    for r in reply.runs:
        cells = (
            r.run_id,
            f"{r.plugin} {' '.join(r.argv)}",
            slot_of(r.master),
            "waiting" if r.waiting else r.state,  # for peers: none has begun a job of it
            _done_cell(r),
            f"{r.elapsed_s:.1f}",
            f"{int(r.counters['jobs_run']):,}" if "jobs_run" in r.counters else "-",
            _iteration_cell(r.counters),
            f"{int(r.counters['entity_moves']):,}" if "entity_moves" in r.counters else "-",
            *(f"{int(r.counters.get(name, 0)):,}" for name in recovery),
        )
        table.add_row(*(cell for column, cell in zip(every, cells, strict=True) if column in shown))
    return table


# Decisions of the adaptivity coordinators `satind status` shows (the newest).
SHOWN_DECISIONS = 5


def decisions_table(reply: m.StatusReply) -> Table | None:
    """The self-adaptivity coordinators' last decisions (every run's master with
    ``[adapt] enabled`` keeps its own, node/adapt.py), newest last; None when there are
    none."""
    made = sorted(
        ((d, p.name) for p in reply.peers for d in p.decisions), key=lambda item: item[0].at
    )[-SHOWN_DECISIONS:]
    if not made:
        return None
    table = Table(title="self-adaptivity", title_justify="left")
    for column in ("at", "coordinator", "run", "peers", "efficiency", "action"):
        table.add_column(column, no_wrap=True)
    table.add_column("why", overflow="fold")
    for d, peer in made:
        at = datetime.datetime.fromtimestamp(d.at).strftime("%H:%M:%S")
        table.add_row(
            at, slot_of(peer), d.run_id, str(d.peers), f"{d.efficiency:.2f}", d.action, d.why
        )
    return table


def _iteration_cell(counters: dict[str, int | float]) -> str:
    if "iteration" not in counters:
        return "-"
    if "iterations" in counters:
        return f"{int(counters['iteration']):,}/{int(counters['iterations']):,}"
    return f"{int(counters['iteration']):,}"


def _done_cell(r: m.RunStatus) -> str:
    # A cancelled run's master keeps no count of it, and an iterative run that stops when
    # its plugin says has no share done: "-", not a made-up figure.
    if r.state == "cancelled":
        return "-"
    if r.state == "running" and "iteration" in r.counters and "iterations" not in r.counters:
        return "-"
    return f"{100 * r.progress:.1f}%"


@dataclass(frozen=True)
class BarView:
    """What a run's bar shows: ``completed`` of ``total`` (None: an end not known beforehand,
    a bar that pulses) and the text beside it."""

    completed: float
    total: float | None
    done: str


# Terminals narrower than this show an iterative run's iterations as "206/300": the bar's
# times and rates keep their room on 80 columns.
WIDE = 100


def bar_view(
    progress: float, iteration: int = -1, iterations: int = 0, wide: bool = True
) -> BarView:
    """A run's bar from its progress (the share done) or, for an iterative or SPMD run
    (``iteration`` >= 0), its iterations done of ``iterations`` (0: not known); ``wide``:
    say "iteration 206 of 300", else "206/300"."""
    if iteration < 0:
        return BarView(progress, 1.0, f"{100 * progress:5.1f}%")
    if iterations > 0:
        done = f"iteration {iteration} of {iterations}" if wide else f"{iteration}/{iterations}"
        return BarView(min(iteration, iterations), iterations, done)
    return BarView(iteration, None, f"iteration {iteration}" if wide else f"{iteration}/?")


def status_bar_view(run: m.RunStatus, wide: bool = True) -> BarView:
    """The bar of a run's line in the status (its iteration and iterations are counters the
    master adds: node/status.py)."""
    counters = run.counters
    iteration = int(counters["iteration"]) if "iteration" in counters else -1
    return bar_view(run.progress, iteration, int(counters.get("iterations", 0)), wide)


class ElapsedColumn(ProgressColumn):
    """Time since the bar was added, going on until the run ends. (rich's TimeElapsedColumn
    stops once the bar is full, which a run reaches before its end: a tree done whose
    statistics are being collected, an SPMD run's last iteration before its gather.)"""

    def render(self, task: Task) -> Text:
        elapsed = datetime.timedelta(seconds=int(task.elapsed or 0))
        return Text(str(elapsed), style="progress.elapsed")


def show_bar(progress: Progress, task_id: TaskID, view: BarView, rate: str) -> None:
    if view.total is None:
        # update() takes total=None for "unchanged": an end not known makes the bar pulse.
        for task in progress.tasks:
            if task.id == task_id:
                task.total = None
    progress.update(task_id, completed=view.completed, total=view.total, done=view.done, rate=rate)


def _console() -> Console:
    # Piped output gets a width that fits the tables instead of rich's default 80 columns.
    console = Console()
    return console if console.is_terminal else Console(width=160)


def print_status(reply: m.StatusReply) -> None:
    console = _console()
    narrow = console.width < TABLES_WIDE
    console.print(peers_table(reply, narrow))
    if reply.runs:
        console.print(runs_table(reply, narrow))
    else:
        console.print("no runs")
    decisions = decisions_table(reply)
    if decisions is not None:
        console.print(decisions)
    for p in reply.peers:
        for line in p.not_serving:  # a run it takes no part in, and why
            console.print(f"{slot_of(p.name)} takes no part in run {line}", markup=False)


def run_bars(console: Console) -> Progress:
    """The bars of `status --watch`: one per live run, with its rates (on a terminal narrower
    than WIDE, a shorter bar: with the run's id, share, time and rate it fits 80 columns)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(bar_width=40 if console.width >= WIDE else 20),
        TextColumn("{task.fields[done]}"),
        ElapsedColumn(),
        TextColumn("{task.fields[rate]}"),
        console=console,
    )


async def watch_status(client: Client, cfg: Config) -> None:
    """Refresh the status until Ctrl-C: peers, a bar per live run with its own jobs/s and
    steals/s, and the cluster's. It follows the cluster, not one peer: when the peer it talks
    to leaves or is lost, it moves to another that was alive in the last view."""
    console = Console()
    progress = run_bars(console)
    tasks: dict[str, TaskID] = {}
    seen: dict[str, tuple[float, float, float]] = {}  # run or "" (cluster): time, jobs, steals
    rates = Text("")
    notice = Text("")
    addresses: dict[str, str] = {}
    async with contextlib.AsyncExitStack() as stack:
        current = client
        with Live(console=console, refresh_per_second=4, screen=False) as live:
            while True:
                try:
                    reply = await current.status()
                except PeerUnavailable as exc:
                    moved = await _another_peer(stack, addresses, current, cfg)
                    if moved is None:
                        live.update(Text(f"lost every peer: {exc}", style="red"))
                        return
                    current, name = moved
                    notice = Text(
                        f"lost the peer ({exc}); now watching through {slot_of(name)}", "yellow"
                    )
                    continue
                now = trio.current_time()
                addresses = {
                    p.name: p.address
                    for p in reply.peers
                    if p.address and p.state in ("alive", "draining", "reclaimed")
                }
                jobs = sum(p.jobs_run for p in reply.peers)
                steals = sum(p.stolen_local + p.stolen_wide for p in reply.peers)
                up = sum(1 for p in reply.peers if p.state in ("alive", "draining", "reclaimed"))
                rates = Text(f"cluster: {_rates(seen, '', now, jobs, steals)} · {up} peers up")
                live_runs = {r.run_id for r in reply.runs if r.state in ("running", "queued")}
                for run_id in [r for r in tasks if r not in live_runs]:
                    progress.remove_task(tasks.pop(run_id))  # finished runs leave the screen
                    seen.pop(run_id, None)
                for run in reply.runs:
                    if run.run_id not in live_runs:
                        continue
                    if run.run_id not in tasks:
                        tasks[run.run_id] = progress.add_task(
                            f"{run.run_id} {run.plugin} {' '.join(run.argv)}"
                            if console.width >= WIDE
                            else run.run_id,  # 80 columns: the id, and the bar keeps room
                            total=1.0,
                            rate="",
                            done="",
                        )
                    counters = run.counters
                    rate = _rates(
                        seen,
                        run.run_id,
                        now,
                        float(counters.get("jobs_run", 0)),
                        float(counters.get("stolen_local", 0))
                        + float(counters.get("stolen_wide", 0)),
                        wide=console.width >= WIDE,
                    )
                    if run.waiting:  # not slow: no peer has begun a job of it yet
                        rate = "waiting for peers"
                    view = status_bar_view(run, console.width >= WIDE)
                    show_bar(progress, tasks[run.run_id], view, rate)
                narrow = console.width < TABLES_WIDE
                views: list[Table | Progress | Text] = [peers_table(reply, narrow), progress]
                decisions = decisions_table(reply)
                if decisions is not None:
                    views.append(decisions)
                live.update(Group(*views, rates, notice))
                await trio.sleep(cfg.client.watch_interval_s)


def _rates(
    seen: dict[str, tuple[float, float, float]],
    key: str,
    now: float,
    jobs: float,
    steals: float,
    wide: bool = True,
) -> str:
    """jobs/s and steals/s since the last refresh (not lifetime totals); not ``wide``: jobs/s
    only."""
    last = seen.get(key)
    seen[key] = (now, jobs, steals)
    if last is None or now <= last[0]:
        return ""
    dt = now - last[0]
    jobs_s, steals_s = max(0.0, (jobs - last[1]) / dt), max(0.0, (steals - last[2]) / dt)
    if not wide:
        return f"{jobs_s:,.0f} jobs/s"
    return f"{jobs_s:,.0f} jobs/s · {steals_s:,.1f} steals/s"


async def _another_peer(
    stack: contextlib.AsyncExitStack, addresses: dict[str, str], lost: Client, cfg: Config
) -> tuple[Client, str] | None:
    """A connection to another peer of the last view, or None if none answers."""
    credentials = lost.transport.credentials
    for name, text in sorted(addresses.items()):
        try:
            address = parse_address(text)
        except ValueError:
            continue
        if address == lost.address:
            continue
        try:
            client = await stack.enter_async_context(connect(address, cfg, credentials, name))
        except PeerUnavailable:
            continue
        return client, name
    return None


def run_bar(console: Console, get_time: Callable[[], float] | None = None) -> Progress:
    """The bar of `satind run` and `submit --wait`: the run, its share or iterations done,
    the time since it began, the time left and its rates (``get_time``: rich's clock)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[done]}"),
        ElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[rate]}"),
        console=console,
        transient=True,
        refresh_per_second=4,
        get_time=get_time,
    )


async def follow_run(
    client: Client, run_id: str, plugin: str, argv: list[str], cfg: Config
) -> m.RunResult:
    """Show a progress bar (fraction of the tree done, from job ids; an iterative run's
    iterations) until the run ends, and the run's output (what its jobs print or log) above
    it as it comes."""
    result: list[m.RunResult] = []
    lost: list[Exception] = []
    with run_bar(Console(stderr=True)) as progress:
        task = progress.add_task(f"{plugin} {' '.join(argv)}", total=1.0, rate="", done="")
        done = trio.Event()
        async with trio.open_nursery() as nursery:

            async def wait() -> None:
                try:
                    result.append(await client.result_with_output(run_id, show))
                except (PeerUnavailable, RequestFailed) as exc:
                    lost.append(exc)  # raised below, as itself: the caller follows the run
                    nursery.cancel_scope.cancel()
                done.set()

            def show(line: str) -> None:
                progress.console.print(line, markup=False, highlight=False)

            nursery.start_soon(wait)
            started = trio.current_time()
            while not done.is_set():
                reply = await client.progress(run_id, within_s=cfg.run.progress_poll_s * 4)
                if reply is not None and reply.progress >= 0:
                    elapsed = max(trio.current_time() - started, 1e-9)
                    jobs = reply.counters.get("jobs_run", 0)
                    steals = reply.counters.get("stolen_local", 0) + reply.counters.get(
                        "stolen_wide", 0
                    )
                    wide = progress.console.width >= WIDE
                    view = bar_view(reply.progress, reply.iteration, reply.iterations, wide)
                    rate = f"{jobs / elapsed:,.0f} jobs/s · {steals / elapsed:,.1f} steals/s"
                    if reply.iteration < 0 and stats.waiting_for_peers("running", reply.counters):
                        rate = "waiting for peers"  # no peer has begun a job of it yet
                    show_bar(progress, task, view, rate)
                with trio.move_on_after(cfg.run.progress_poll_s):
                    await done.wait()
    if lost:
        raise lost[0]
    return result[0]
