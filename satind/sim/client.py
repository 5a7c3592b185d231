"""The simulated client: it submits the workload (or a plugin) and the scenario's other runs
with the real protocol, and takes their replies and results."""

from __future__ import annotations

from typing import Any

import trio

from satind.net import codec
from satind.net import messages as m
from satind.net.memory import MemoryLink
from satind.sim.state import SimState
from satind.sim.workload import PLUGIN

CLIENT = "sim-client"
# Request numbers of the scenario's other runs' submissions: this plus their index (the
# workload's submission is 1, a resume 3).
RUNS_REQ = 1000


class SimClient(SimState):
    """The client side of a simulation."""

    async def _submit(self, client: Any) -> None:
        await trio.sleep_until(self.scenario.submit_at)
        master = sorted(self.live())[0]
        if self.plugin is not None:
            self.submitted_at = trio.current_time()
            self.master = master
            self.trace("submit", master.encode())
            plugin = self.plugin
            client.post(master, m.Submit(1, plugin.name, self.argv, plugin.code_hash))
            return
        w = self.scenario.workload
        assert w is not None
        argv = [str(w.depth), str(w.branching), repr(w.leaf_ms), w.dist, repr(w.imbalance)]
        if w.needles > 0 or w.steps > 0:
            argv.append(repr(w.needles))
        if w.steps > 0:
            argv.append(str(w.steps))
            if w.tail_ms > 0:
                argv.append(repr(w.tail_ms))
        self.submitted_at = trio.current_time()
        self.master = master
        self.trace("submit", master.encode())
        client.post(master, m.Submit(1, PLUGIN.name, argv, PLUGIN.code_hash))

    async def _submit_run(self, client: Any, index: int) -> None:
        """One of the scenario's other runs, to the master it names."""
        outcome = self.runs[index]
        spec = outcome.spec
        await trio.sleep_until(spec.at)
        outcome.submitted_at = trio.current_time()
        [to] = self.named([spec.to])
        if to not in self.live():
            outcome.error = f"{spec.to} is not a live peer at {spec.at:g} s"
            self._check_done()
            return
        plugin = self.run_plugins[spec.plugin]
        self.trace("submit", f"{spec.plugin}>{to}".encode())
        client.post(to, m.Submit(RUNS_REQ + index, spec.plugin, list(spec.argv), plugin.code_hash))

    def _run_message(self, msg: m.Message) -> bool:
        """A reply about one of the scenario's other runs (True), or not one."""
        if isinstance(msg, m.Submitted) and msg.req >= RUNS_REQ:
            outcome = self.runs[msg.req - RUNS_REQ]
            if msg.error is not None:
                outcome.error = f"refused: {msg.error.type}: {msg.error.message}"
                self._check_done()
            else:
                outcome.run_id = msg.run_id
            return True
        if isinstance(msg, m.RunResult):
            for outcome in self.runs:
                if outcome.run_id == msg.run_id and outcome.result is None:
                    outcome.result = msg
                    outcome.ended_at = trio.current_time()
                    self.last_change = max(self.last_change, outcome.ended_at)
                    self.trace("result", codec.encode_message(msg))
                    self._check_done()
                    return True
        return False

    def _check_done(self) -> None:
        """The workload's run (if any) and every other run have ended."""
        workload_done = self.scenario.workload is None or self.result is not None
        if workload_done and all(o.over for o in self.runs):
            self._done.set()

    def _client_message(self, link: MemoryLink, msg: m.Message) -> None:
        if self.runs and self._run_message(msg):
            return
        if isinstance(msg, m.Submitted):
            if msg.error is not None:
                self.submit_error = f"{msg.error.type}: {msg.error.message}"
            else:
                self.run_id = msg.run_id
        if isinstance(msg, m.ResultReply) and msg.result is not None and self.result is None:
            msg = msg.result  # the result, relayed by a survivor after the master was lost
        if isinstance(msg, m.RunResult) and self.result is None:
            self.result = msg
            self.result_at = trio.current_time()
            self.last_change = max(self.last_change, self.result_at)
            self.trace("result", codec.encode_message(msg))
            self._check_done()
