"""One heuristic's run in the study of scheduling-iterative-apps-volatile-resources §7, slot by
slot: an iterative master-worker application (``iterations`` iterations of ``m`` same-size
tasks, a barrier after each) on ``p`` workers whose availability follows their Markov chains
(``volatile/platform.py``), a master that sends at most ``n_com`` transfers (program or task
data) at once, and a heuristic that decides which UP worker gets which task.

One slot of the simulation, for every worker:

1. its state for the slot comes from its trace (traces are drawn once per instance, so every
   heuristic meets the same availability);
2. going DOWN loses its program, its task data and its partial result (its tasks go back to
   the pool); RECLAIMED suspends everything (kept for the release);
3. if some worker could start something and a channel is free, the heuristic plans the tasks
   not yet begun; a worker planned for a task is committed to it (§6.1: "if it is engaged in
   a communication, it finishes it together with the corresponding computation") and
   receives the program first if it has none, then the task's data, over one channel, if it
   holds no task beyond the one it computes (§3.3: data for at most one task ahead); when
   UP workers outnumber the tasks left, idle workers get replicas (up to ``replicas`` extra
   copies of a task, §6.1), the first copy to finish cancels the others;
4. UP workers progress: up to ``n_com`` transfers (in the order they started), and each
   worker's computation — overlapped with the data of its next task.

Choices where the paper is silent, each a field of ``Params`` (docs/volatile.md): workers
start UP (``initial``); a worker receives the program before any data, over one link; a
reclaimed worker's transfer gives up its channel and queues for one when released; replicas
use bandwidth like any task; Delay(q) is the time to finish the begun work (its program, the
computation of its current task, and its next task's data overlapped with that computation,
then the next task's computation); heuristics know the true chains (``chains="estimated"``
makes them learn the chains from the states seen, as the daemons do).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from satind.volatile.heuristics import Candidate, assignments
from satind.volatile.model import DOWN, UP, Estimator
from satind.volatile.platform import Params, Platform, Traces


@dataclass
class _Worker:
    w: int
    has_prog: bool = False
    prog_left: int = -1  # slots of program transfer left; -1: not receiving it
    cur: int = -1  # task computing (-1: none)
    comp_left: int = 0
    nxt: int = -1  # task whose data is coming or came (-1: none)
    data_left: int = 0
    asked_at: int = -1  # slot its current transfer started (channel order); -1: none

    def ready(self) -> bool:
        """Could be committed to a next task now (its program, if it has none, then its data)."""
        return self.asked_at < 0 and self.nxt < 0

    def delay(self, t_prog: int) -> int:
        """Delay(q): slots to finish the begun work if it stays UP without contention."""
        d = 0 if self.has_prog else (self.prog_left if self.prog_left >= 0 else t_prog)
        c = self.comp_left if self.cur >= 0 else 0
        if self.nxt >= 0:
            return d + max(c, self.data_left) + self.w
        return d + c

    def cancel(self, task: int) -> None:
        """Another copy of ``task`` finished: this one's data and partial result go."""
        if self.cur == task:
            self.cur, self.comp_left = -1, 0
        if self.nxt == task:
            self.nxt, self.data_left = -1, 0
            if self.prog_left < 0:
                self.asked_at = -1


@dataclass
class Outcome:
    """One heuristic's run on one instance."""

    makespan: int  # slots; params.max_slots when it did not finish
    transfers: int = 0  # tasks committed to a worker (its program if needed, then data)
    replicas: int = 0  # replica copies started


class _Run:
    """One heuristic on one instance (see the module's docstring for a slot's steps)."""

    def __init__(
        self, params: Params, platform: Platform, traces: Traces, heuristic: str, seed: int
    ) -> None:
        self.params = params
        self.platform = platform
        self.traces = traces
        self.heuristic = heuristic
        self.rng = random.Random(f"{seed}:{heuristic}")
        self.ws = [_Worker(w) for w in platform.w]
        self.estimators = [Estimator() for _ in self.ws] if params.chains == "estimated" else None
        self.out = Outcome(0)
        self.t = 0

    def run(self) -> Outcome:
        params = self.params
        for _ in range(params.iterations):
            if not self._iteration():
                self.out.makespan = params.max_slots
                return self.out
        self.out.makespan = self.t
        return self.out

    def _iteration(self) -> bool:
        params, ws = self.params, self.ws
        m, n_com = params.m, params.n_com
        self.done = done = [False] * m
        self.copies: list[list[int]] = [[] for _ in range(m)]
        copies = self.copies
        self.left = m
        while self.left > 0:
            if self.t >= params.max_slots:
                return False
            states = self.traces.at(self.t)
            if self.estimators is not None:
                for q, s in enumerate(states):
                    self.estimators[q].observe(s)
            for q, s in enumerate(states):  # losses
                if s == DOWN:
                    wk = ws[q]
                    if wk.has_prog or wk.prog_left >= 0 or wk.cur >= 0 or wk.nxt >= 0:
                        for task in (wk.cur, wk.nxt):
                            if task >= 0:
                                copies[task].remove(q)
                        ws[q] = _Worker(wk.w)
            up = [q for q, s in enumerate(states) if s == UP]
            busy = sum(1 for q in up if ws[q].asked_at >= 0)
            if busy < n_com and any(ws[q].ready() for q in up):
                self._schedule(up, n_com - busy)
            # Progress: transfers in the order they started, n_com at most; computations.
            movers = sorted((ws[q].asked_at, q) for q in up if ws[q].asked_at >= 0)
            for _, q in movers[:n_com]:
                wk = ws[q]
                if wk.prog_left > 0:
                    wk.prog_left -= 1
                    if wk.prog_left == 0:
                        # The task's data follows on the same channel; nothing follows when
                        # the task was finished elsewhere meanwhile.
                        wk.has_prog, wk.prog_left = True, -1
                        if wk.nxt < 0:
                            wk.asked_at = -1
                elif wk.nxt >= 0 and wk.data_left > 0:
                    wk.data_left -= 1
                    if wk.data_left == 0:
                        wk.asked_at = -1
            for q in up:
                wk = ws[q]
                if wk.cur >= 0:
                    wk.comp_left -= 1
                    if wk.comp_left == 0:
                        task, wk.cur = wk.cur, -1
                        if not done[task]:
                            done[task] = True
                            self.left -= 1
                            for other in copies[task]:
                                if other != q:
                                    ws[other].cancel(task)
                            copies[task] = []
                if wk.cur < 0 and wk.nxt >= 0 and wk.data_left == 0 and wk.asked_at < 0:
                    wk.cur, wk.comp_left, wk.nxt = wk.nxt, wk.w, -1
            self.t += 1
        return True

    def _candidates(self, qs: Sequence[int]) -> list[Candidate]:
        t_prog = self.params.t_prog
        return [
            Candidate(
                q,
                self.ws[q].w,
                self.ws[q].delay(t_prog),
                self.estimators[q].chain()
                if self.estimators is not None
                else self.platform.chains[q],
            )
            for q in qs
        ]

    def _start(self, q: int, task: int) -> None:
        """Commit ``q`` to ``task`` and start its transfer: the program first if it has none,
        then the task's data. The task is begun (§6.1): it stays with ``q`` until done, lost
        (DOWN) or finished elsewhere."""
        wk = self.ws[q]
        self.out.transfers += 1
        wk.asked_at = self.t
        if not wk.has_prog and wk.prog_left <= 0:
            wk.prog_left = self.params.t_prog
        wk.nxt, wk.data_left = task, self.params.t_data
        self.copies[task].append(q)

    def _schedule(self, up: list[int], free: int) -> None:
        """Plan the tasks not begun, start what can start now, then replicas."""
        params, ws, done, copies = self.params, self.ws, self.done, self.copies
        unbegun = [i for i in range(params.m) if not done[i] and not copies[i]]
        if unbegun:
            order = assignments(
                self.heuristic,
                self._candidates(up),
                len(unbegun),
                params.t_data,
                params.n_com,
                self.rng,
                params.n_active == "self",
            )
            ready = sum(1 for q in up if ws[q].ready())
            seen: set[int] = set()
            at = 0
            for q in order:
                if free <= 0 or at >= len(unbegun) or ready <= 0:
                    break  # nothing more can start now: the rest of the plan waits
                if q in seen or not ws[q].ready():
                    continue
                seen.add(q)
                free -= 1
                ready -= 1
                self._start(q, unbegun[at])
                at += 1
        if params.replicas <= 0 or free <= 0 or len(up) <= self.left:
            return
        idle = [q for q in up if ws[q].cur < 0 and ws[q].nxt < 0 and ws[q].ready()]
        open_tasks = [
            i for i in range(params.m) if not done[i] and 0 < len(copies[i]) <= params.replicas
        ]
        if not idle or not open_tasks:
            return
        order = assignments(
            self.heuristic,
            self._candidates(idle),
            len(idle),
            params.t_data,
            params.n_com,
            self.rng,
            params.n_active == "self",
        )
        seen = set()
        for q in order:
            if free <= 0:
                break
            if q in seen:
                continue
            seen.add(q)
            open_tasks.sort(key=lambda i: len(copies[i]))
            if len(copies[open_tasks[0]]) > params.replicas:
                break
            free -= 1
            self._start(q, open_tasks[0])
            self.out.replicas += 1


def simulate(
    params: Params, platform: Platform, traces: Traces, heuristic: str, seed: int = 0
) -> Outcome:
    """One run of ``heuristic``: the slots ``params.iterations`` iterations took."""
    return _Run(params, platform, traces, heuristic, seed).run()
