"""A chaos soak (issue 28): machines crash, runs keep coming, and every answer must stay exact.

Two or three `satind start` daemons (two peers each, one per core of this machine) on fixed
ports, with the shipped defaults: no config file, so the default membership timings, and the
daemon restarting a crashed peer at the same address (tests/integration/crashes.py starts
them). For ``--minutes``:

* ``--clients`` client threads submit one run after another (`satind submit ... --wait
  --json`, a new client process per run, as a user types it), each to a peer picked at random,
  from a mix of every kind of run: divide-and-conquer with CPU-bound (fib, nqueens, tree busy)
  and sleeping (tree sleep) leaves, speculative (sat, search, othello), shared objects (tsp,
  knapsack, barneshut), iterative (kmeans) and SPMD (heat2d), each sized to take about 1 to 10
  s here while the others run;
* a killer, every 30 to 60 s (``--kill-every``), SIGKILLs a random peer process (its daemon
  restarts it), or the master of a run that is running (found from `satind status --json`), or
  a whole machine: its daemon and peers, started again on the same ports a moment later;
* a sampler reads every peer's (and daemon's) VmRSS every 10 s.

With ``--testbed`` the machines are a testbed's (satind/testbed/, needs root): four machines
of two peers by default, each a network namespace with its own address running `satind
start` with the shipped defaults on 0.0.0.0:7420, the first without seeds, the others seeded
with it; clients submit to random machines' addresses from the host. The killer draws from
the faults machines meet (benchmarks/soak_testbed.py): SIGKILL of a peer, of a run's master,
of a whole machine or of the master's machine (each started again 3 s later), a `satind
stop` and start, `satind stop --drain --deadline 5` and start, a partition of a random split
of the machines for 10-60 s, SIGSTOP of a machine for 10-30 s; after each fault, how long
until every peer sees every other alive again (one system), and at the end whether they do.

Every answer is compared with an independent reference (tests/references.py). A run is
*exact*, *wrong* (a reference or the plugin's check disagrees), *lost* (accepted, then the
client got an error instead of an answer), *stuck* (no answer within ``--deadline`` s: its
client is killed) or *refused* (never accepted; the reason is kept). Then no new run starts and
the runs in flight finish (each within its deadline). The report: runs by outcome and by
workload, each kill (each fault) and how long until the runs in flight at that moment
answered, the peers' RSS (first / last / max per slot, and whether each process stayed flat),
and every run that was not exact with the kills during it and the daemon log lines that name
it. A human summary goes to stdout, everything to ``--out`` (JSON). Everything the soak
starts it stops, by pid, also on Ctrl-C or an error; the work directory (keys, daemon logs)
is kept for a look afterwards.

    python benchmarks/soak.py --minutes 10 [--daemons 2] [--clients 3] [--seed 1]
    flock /tmp/satind-cpu.lock python benchmarks/soak.py --testbed --minutes 30 [--daemons 4]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from satind.net.names import slot_of  # noqa: E402
from tests import references  # noqa: E402
from tests.integration.procs import kill_all, rss_kb  # noqa: E402
from tests.integration.test_daemon import client, client_in_background  # noqa: E402


@dataclass(frozen=True)
class Workload:
    kind: str
    argv: tuple[str, ...]


# Each kind of run, sized on this project's 2-core machine: alone on 4 peers each run takes
# 0.3 to 4 s (measured before the soak existed; client start-up adds about 0.6 s), about 1 to
# 10 s with three clients' runs sharing the peers. sat and search are instances with a model
# and a needle: an UNSAT answer or a tree without needle has no cheap independent check
# above 22 variables (tests/references.py), so a wrong "UNSAT" shows as wrong.
WORKLOADS: tuple[Workload, ...] = (
    Workload("divide-and-conquer, busy", ("fib", "36", "18")),
    Workload("divide-and-conquer, busy", ("nqueens", "13")),
    Workload("divide-and-conquer, busy", ("tree", "3", "8", "10", "busy")),
    Workload("divide-and-conquer, sleeping", ("tree", "3", "8", "20", "sleep")),
    Workload("divide-and-conquer, sleeping", ("tree", "4", "6", "10", "sleep")),
    Workload("speculative", ("sat", "random", "130", "2")),
    Workload("speculative", ("sat", "random", "120", "1")),
    Workload("speculative", ("search", "5", "6", "3", "2000")),
    Workload("speculative", ("othello", "6", "3")),
    Workload("shared objects", ("tsp", "10", "4", "shared")),
    Workload("shared objects", ("tsp", "14", "3", "shared")),
    Workload("shared objects", ("knapsack", "80", "3", "shared")),
    Workload("shared objects", ("barneshut", "3000", "3", "1", "shared")),
    Workload("iterative", ("kmeans", "100000", "6", "12", "3", "30")),
    Workload("SPMD", ("heat2d", "120", "120", "200", "8")),
    Workload("SPMD", ("heat2d", "200", "200", "300", "6")),
)

# seconds. How long a killed peer or machine may take to be back before the soak says so.
BACK_LIMIT_S = 120.0
# seconds. How long the killer waits for a process in an empty slot it is to kill.
SLOT_WAIT_S = 30.0
# A process is judged on its samples under load (while runs were submitted) from WARM_S into
# its life (plugins imported, the first runs done) on, when they span JUDGED_S or more. Its
# RSS steps up as it meets bigger working sets, then stays: it is flat when the high-water
# mark of the second half of that span exceeds the first half's by at most FLAT_MB or
# FLAT_FRACTION, whichever is more. A leak keeps raising it.
WARM_S = 60.0
JUDGED_S = 180.0
FLAT_MB = 5.0
FLAT_FRACTION = 0.10
# Daemon log lines quoted for a run that was not exact.
LOG_LINES = 60


@dataclass
class Submission:
    n: int
    client: int
    kind: str
    argv: tuple[str, ...]
    to: str  # the slot it was submitted to
    start: float  # seconds since the soak began
    wall: float  # time.time() at the start (the daemon logs' clock)
    end: float | None = None
    outcome: str = ""  # exact, wrong, lost, stuck, refused (abandoned: interrupted)
    run_id: str = ""
    why: str = ""
    elapsed_s: float | None = None  # the run's own time, from its report
    restarted: int = 0  # jobs_restarted in its report
    stderr_tail: list[str] = field(default_factory=list)


@dataclass
class Kill:
    """A fault the killer drew (soak_loopback.FAULTS, soak_testbed.FAULTS)."""

    t: float
    wall: float
    action: str  # peer, master, machine (testbed: master-machine, restart, drain, pause, ...)
    slots: list[str]
    pids: list[int]
    in_flight: list[int]  # submissions not answered at the kill
    run_id: str = ""  # the run whose master it was (action master)
    # Until a new process runs in the slot, the machine is up, the partition healed or the
    # machine resumed: the fault undone.
    back_s: float | None = None
    note: str = ""
    # Testbed: from the fault undone until every peer saw every other alive (None: not within
    # soak_testbed.SETTLE_LIMIT_S, or not measured).
    one_system_s: float | None = None


@dataclass
class RssSample:
    t: float
    slot: str  # m1/0 for a peer, m1 for a daemon
    pid: int
    mb: float


class Checker:
    """Verdicts of tests/references.py, each computed once per (run, answer): many runs share
    an argv and an answer, and some references cost seconds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[str, str] = {}

    def why_not_exact(self, argv: Sequence[str], result: Any) -> str:
        key = json.dumps([list(argv), result], sort_keys=True)
        # One at a time: they are CPU-bound, two would only share the GIL.
        with self._lock:
            if key not in self._known:
                try:
                    references.verify(argv[0], argv[1:], result)
                    self._known[key] = ""
                except Exception as exc:  # a malformed answer is as wrong as a bad one
                    self._known[key] = f"{type(exc).__name__}: {exc}"[:500]
            return self._known[key]


class Machines(Protocol):
    """What the soak needs of the machines it runs on: daemons on loopback (soak_loopback) or
    a testbed's (soak_testbed), each fault recorded with ``Soak.record``. Machines are m1,
    m2, ...; their peers' slots m1/0, m1/1, ..."""

    keys: Path
    # (action, probability): what the killer draws from, in this order.
    faults: Sequence[tuple[str, float]]

    def pick(self, rng: random.Random) -> tuple[str, str]:
        """A slot at random and its address (where a client submits)."""
        ...

    def firsts(self) -> list[str]:
        """Each machine's first peer's address (for `satind status`)."""
        ...

    def peers(self, machine: str) -> dict[str, int]:
        """Slot -> pid of the machine's peer processes now."""
        ...

    def processes(self) -> list[tuple[str, int]]:
        """(slot or machine, pid) of every process whose RSS is sampled."""
        ...

    def logs(self) -> list[tuple[str, Path]]:
        """(name, path) of every daemon log."""
        ...

    def config(self) -> dict[str, Any]: ...

    def inflict(self, soak: Soak, action: str, rng: random.Random) -> Kill:
        """Apply the fault ``action`` and undo it (a machine started again, a partition
        healed); returns it, recorded with ``soak.record``."""
        ...

    def at_end(self, soak: Soak) -> dict[str, Any] | None:
        """What is checked once every run answered (the testbed: one system)."""
        ...


class Soak:
    def __init__(self, args: argparse.Namespace, machines: Machines) -> None:
        self.args = args
        self.machines = machines
        self.keys = machines.keys
        self.began = time.monotonic()
        self.until = self.began + 60 * args.minutes
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.submissions: list[Submission] = []
        self.clients: dict[int, subprocess.Popen[str]] = {}
        self.kills: list[Kill] = []
        self.killer_errors: list[str] = []
        self.threads: list[threading.Thread] = []
        # `satind status --json` runs at the end of the soak, for the runs that were not exact.
        self.final_status: dict[str, dict[str, Any]] = {}
        self.rss: list[RssSample] = []
        self.checker = Checker()
        self.end_state: dict[str, Any] | None = None
        only = set(args.only or [])
        self.workloads = [w for w in WORKLOADS if not only or w.argv[0] in only]

    def now(self) -> float:
        return time.monotonic() - self.began

    def say(self, text: str) -> None:
        # One write per line: the threads' lines do not interleave.
        sys.stderr.write(f"[{self.now():7.1f} s] {text}\n")
        sys.stderr.flush()

    # -- clients -------------------------------------------------------------------------

    def client(self, index: int) -> None:
        rng = random.Random(f"{self.args.seed}-client-{index}")
        while not self.stopping.is_set() and time.monotonic() < self.until:
            workload = rng.choice(self.workloads)
            slot, address = self.machines.pick(rng)
            with self.lock:
                sub = Submission(
                    len(self.submissions),
                    index,
                    workload.kind,
                    workload.argv,
                    slot,
                    self.now(),
                    time.time(),
                )
                self.submissions.append(sub)
            self.submit(sub, address)

    def submit(self, sub: Submission, to: str) -> None:
        proc = client_in_background(self.keys, to, "submit", *sub.argv, "--wait", "--json")
        with self.lock:
            self.clients[sub.n] = proc
            if self.stopping.is_set():  # abandon() listed the clients before this one
                proc.kill()
        stuck = False
        try:
            out, err = proc.communicate(timeout=self.args.deadline)
        except subprocess.TimeoutExpired:
            stuck = True
            proc.kill()
            out, err = proc.communicate()
        sub.end = self.now()
        with self.lock:
            del self.clients[sub.n]
        if self.stopping.is_set() and proc.returncode < 0:
            sub.outcome, sub.why = "abandoned", "the soak was interrupted"
        else:
            self.classify(sub, proc.returncode, out, err, stuck)
        if sub.outcome != "exact":
            self.say(f"run {sub.n} ({' '.join(sub.argv)}, {sub.run_id}): {sub.outcome}: {sub.why}")

    def classify(self, sub: Submission, code: int, out: str, err: str, stuck: bool) -> None:
        lines = [line for line in err.splitlines() if line.strip()]
        sub.stderr_tail = lines[-8:]
        accepted = re.search(r"satind: run (\S+) submitted", err)
        sub.run_id = accepted.group(1) if accepted else ""
        report: dict[str, Any] | None = None
        with suppress(ValueError):
            report = json.loads(out)
        if stuck:
            sub.outcome, sub.why = "stuck", f"no answer within {self.args.deadline:g} s"
        elif isinstance(report, dict) and "result" in report:
            sub.run_id = str(report.get("run_id", sub.run_id))
            sub.elapsed_s = report.get("elapsed_s")
            sub.restarted = int(report.get("stats", {}).get("jobs_restarted", 0))
            why = self.checker.why_not_exact(sub.argv, report["result"])
            check = str(report.get("check", ""))
            if not why and check.startswith("failed"):
                why = f"the reference agrees but the plugin's check {check}"
            sub.outcome, sub.why = ("wrong", why) if why else ("exact", "")
        elif accepted:
            sub.outcome = "lost"
            sub.why = f"exit {code}: {lines[-1] if lines else 'no message'}"
        else:
            sub.outcome = "refused"
            sub.why = f"exit {code}: {lines[-1] if lines else 'no message'}"

    # -- killer --------------------------------------------------------------------------

    def killer(self) -> None:
        rng = random.Random(f"{self.args.seed}-killer")
        low, high = self.args.kill_every
        while not self.args.no_kills:
            delay = rng.uniform(low, high)
            if time.monotonic() + delay >= self.until or self.stopping.wait(delay):
                return
            roll, action = rng.random(), self.machines.faults[-1][0]
            for name, p in self.machines.faults:
                if roll < p:
                    action = name
                    break
                roll -= p
            try:
                kill = self.machines.inflict(self, action, rng)
            except Exception as exc:  # no process in a slot, a machine not back, no status
                # The soak goes on (its report says how often the killer failed).
                self.killer_errors.append(f"{self.now():.1f} s: {type(exc).__name__}: {exc}")
                self.say(f"killer: {action}: {type(exc).__name__}: {exc}")
                continue
            self.say(
                f"{kill.action} {', '.join(kill.slots)}"
                + (f" (master of {kill.run_id})" if kill.run_id else "")
                + (f"; undone after {kill.back_s:.1f} s" if kill.back_s is not None else "")
                + (
                    f"; one system {kill.one_system_s:.1f} s later"
                    if kill.one_system_s is not None
                    else ""
                )
                + (f"; {kill.note}" if kill.note else "")
            )

    def in_flight(self) -> list[int]:
        with self.lock:
            return sorted(self.clients)

    def record(self, action: str, slots: list[str], pids: list[int], run_id: str = "") -> Kill:
        """A fault that begins now, with the runs in flight; in the report from now on."""
        kill = Kill(self.now(), time.time(), action, slots, pids, self.in_flight(), run_id)
        with self.lock:
            self.kills.append(kill)
        return kill

    def undone(self, kill: Kill) -> None:
        kill.back_s = round(self.now() - kill.t, 2)

    def kill_peer(self, slot: str, action: str, run_id: str = "") -> Kill:
        """SIGKILL the process in ``slot`` (once one runs there: a slot restarted a moment ago
        may still be empty), then wait until its daemon runs a new one there."""
        machine = slot.split("/")[0]
        deadline = time.monotonic() + SLOT_WAIT_S
        while (pid := self.machines.peers(machine).get(slot)) is None:
            if time.monotonic() > deadline or self.stopping.wait(0.05):
                raise LookupError(f"no process in slot {slot}")
        kill = self.record(action, [slot], [pid], run_id)
        kill_all([pid])
        deadline = time.monotonic() + BACK_LIMIT_S
        while time.monotonic() < deadline and not self.stopping.is_set():
            if self.machines.peers(machine).get(slot, pid) != pid:
                self.undone(kill)
                break
            time.sleep(0.1)
        else:
            kill.note = f"no new process in {slot} after {BACK_LIMIT_S:g} s"
        return kill

    def running_master(self, rng: random.Random) -> tuple[str, str] | None:
        """(slot of its master, run id) of a run that is running now, by `satind status`;
        None when none runs."""
        running: list[dict[str, Any]] = []
        firsts = self.machines.firsts()
        for first in rng.sample(firsts, len(firsts)):
            proc = client(self.keys, first, "status", "--json", timeout=60)
            if proc.returncode == 0:
                running = [r for r in json.loads(proc.stdout)["runs"] if r["state"] == "running"]
                break
        if not running:
            return None
        run = rng.choice(running)
        return slot_of(run["master"]), str(run["run_id"])

    def kill_master(self, rng: random.Random) -> Kill:
        """SIGKILL the master of a run that is running now (any peer when none runs)."""
        found = self.running_master(rng)
        if found:
            return self.kill_peer(found[0], "master", found[1])
        kill = self.kill_peer(self.machines.pick(rng)[0], "peer")
        kill.note = "no run was running: a peer instead of a master"
        return kill

    # -- sampler -------------------------------------------------------------------------

    def sampler(self) -> None:
        while True:
            self.sample()
            if self.stopping.wait(self.args.rss_every):
                return

    def sample(self) -> None:
        t = self.now()
        for slot, pid in self.machines.processes():
            kb = rss_kb(pid)
            if kb is not None:
                with self.lock:
                    self.rss.append(RssSample(round(t, 1), slot, pid, round(kb / 1024, 1)))

    # -- the whole soak ------------------------------------------------------------------

    def run(self) -> None:
        threads = [
            threading.Thread(target=self.client, args=(i,), name=f"client-{i}", daemon=True)
            for i in range(self.args.clients)
        ]
        threads.append(threading.Thread(target=self.killer, name="killer", daemon=True))
        threads.append(threading.Thread(target=self.sampler, name="sampler", daemon=True))
        self.threads = threads
        for thread in threads:
            thread.start()
        last = time.monotonic()
        while any(t.is_alive() for t in threads[:-1]):
            time.sleep(1.0)
            if time.monotonic() - last >= 30:
                last = time.monotonic()
                self.say(self.progress())
        self.stopping.set()
        threads[-1].join()
        self.sample()
        self.say(self.progress())
        self.end_state = self.machines.at_end(self)
        self.look_up_failures()

    def look_up_failures(self) -> None:
        """What the members say about the runs that were not exact, before they stop."""
        ids = {s.run_id for s in self.submissions if s.outcome in FAILURES and s.run_id}
        if not ids:
            return
        for first in self.machines.firsts():
            try:
                proc = client(self.keys, first, "status", "--json", timeout=60)
                runs = json.loads(proc.stdout)["runs"] if proc.returncode == 0 else []
            except (subprocess.TimeoutExpired, ValueError):
                continue
            self.final_status = {r["run_id"]: r for r in runs if r["run_id"] in ids}
            return

    def progress(self) -> str:
        with self.lock:
            counts = Counter(s.outcome or "running" for s in self.submissions)
        return ", ".join(f"{n} {what}" for what, n in sorted(counts.items())) + (
            f"; {len(self.kills)} kills"
        )

    def abandon(self) -> None:
        """Stop every client process still waiting (Ctrl-C, an error), by pid, and let the
        killer finish what it does (a machine it starts again must be among the machines when
        they are stopped). A second Ctrl-C cannot cut this, nor the daemons' teardown, short:
        ``main`` ignores SIGINT and SIGTERM until everything is stopped."""
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
        self.stopping.set()
        with self.lock:
            waiting = list(self.clients.values())
        kill_all([p.pid for p in waiting if p.poll() is None])
        for thread in self.threads:
            thread.join(timeout=2 * BACK_LIMIT_S)


# -- the report ------------------------------------------------------------------------------


def spread(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "median": None, "max": None}
    return {"n": len(values), "median": round(statistics.median(values), 2), "max": max(values)}


def report(soak: Soak, workdir: Path, command: str) -> dict[str, Any]:
    subs = soak.submissions
    outcomes = Counter(s.outcome for s in subs)
    refused = Counter(
        _reason(s.why)
        + (" (the peer was down: a fault)" if _down(soak, s.to, s.start, s.end) else "")
        for s in subs
        if s.outcome == "refused"
    )
    by_workload = []
    for workload in soak.workloads:
        mine = [s for s in subs if s.argv == workload.argv]
        times = [s.end - s.start for s in mine if s.outcome == "exact" and s.end is not None]
        by_workload.append(
            {
                "kind": workload.kind,
                "argv": " ".join(workload.argv),
                "runs": len(mine),
                **{o: sum(s.outcome == o for s in mine) for o in OUTCOMES},
                "wall_s": spread([round(t, 2) for t in times]),
            }
        )
    # From the fault's start, and from its end (0: the run answered before the fault was
    # undone, e.g. during a partition).
    after: dict[str, list[float]] = defaultdict(list)
    after_undone: dict[str, list[float]] = defaultdict(list)
    for kill in soak.kills:
        for n in kill.in_flight:
            sub = subs[n]
            if sub.run_id and sub.outcome != "stuck" and sub.end is not None:
                for what in (kill.action, "all"):
                    after[what].append(round(sub.end - kill.t, 2))
                    if kill.back_s is not None:
                        late = sub.end - kill.t - kill.back_s
                        after_undone[what].append(round(max(0.0, late), 2))
    back = [k.back_s for k in soak.kills if k.back_s is not None]
    by_action: dict[str, list[Kill]] = defaultdict(list)
    for kill in soak.kills:
        by_action[kill.action].append(kill)
        by_action["all"].append(kill)
    logs = soak.machines.logs()
    machines = soak.machines.config()
    hit = {n for k in soak.kills for n in k.in_flight}
    exact_times = {
        "with a kill during the run": [
            s.end - s.start for s in subs if s.outcome == "exact" and s.n in hit and s.end
        ],
        "without": [
            s.end - s.start for s in subs if s.outcome == "exact" and s.n not in hit and s.end
        ],
    }
    return {
        "command": command,
        "machine": {"cores": os.cpu_count(), "python": sys.version.split()[0]},
        "commit": _commit(),
        "workdir": str(workdir),
        "config": {
            **machines,
            "peers": machines["daemons"] * machines["peers_per_machine"],
            "minutes": soak.args.minutes,
            "clients": soak.args.clients,
            "seed": soak.args.seed,
            "deadline_s": soak.args.deadline,
            "kill_every_s": None if soak.args.no_kills else soak.args.kill_every,
            "only": soak.args.only,
            "faults": dict(soak.machines.faults),
        },
        "summary": {
            "runs": len(subs),
            **{o: outcomes.get(o, 0) for o in OUTCOMES},
            "abandoned": outcomes.get("abandoned", 0),
            "refused_because": dict(refused),
            "kills": dict(Counter(k.action for k in soak.kills)),
            "killer_errors": soak.killer_errors,
            "peer_tracebacks": len(tracebacks(logs)),
            "back_after_kill_s": spread(back),
            "undone_after_s": {
                what: spread([k.back_s for k in v if k.back_s is not None])
                for what, v in sorted(by_action.items())
            },
            "answer_after_kill_s": {what: spread(v) for what, v in sorted(after.items())},
            "answer_after_undone_s": {what: spread(v) for what, v in sorted(after_undone.items())},
            # Testbed: from each fault undone until one system (None: not within the limit).
            "one_system_after_fault_s": {
                what: spread([k.one_system_s for k in v if k.one_system_s is not None])
                | {"not_within_limit": sum(k.one_system_s is None for k in v)}
                for what, v in sorted(by_action.items())
            }
            if soak.end_state is not None
            else {},
            "at_end": soak.end_state,
            "exact_wall_s": {
                what: spread([round(t, 2) for t in v]) for what, v in exact_times.items()
            },
            "jobs_restarted": sum(s.restarted for s in subs),
            "rss": rss_report(soak.rss, 60 * soak.args.minutes),
        },
        "workloads": by_workload,
        "failures": [failure(s, soak, logs) for s in subs if s.outcome in FAILURES],
        "tracebacks": tracebacks(logs),
        "kills": [asdict(k) for k in soak.kills],
        "runs": [asdict(s) for s in subs],
        "rss_samples": [asdict(r) for r in soak.rss],
    }


OUTCOMES = ("exact", "wrong", "lost", "stuck", "refused")
FAILURES = ("wrong", "lost", "stuck")


def _reason(why: str) -> str:
    """A refusal's reason without what differs between two refusals of the same kind."""
    why = re.sub(r"\d+\.\d+\.\d+\.\d+:\d+", "ADDRESS", why)
    why = re.sub(r"\b\d{8}-\d{6}-[0-9a-f]+\b", "RUN", why)
    return re.sub(r"\b\d+(\.\d+)?\b", "N", why)[:200]


def _down(soak: Soak, slot: str, start: float, end: float | None) -> bool:
    """Whether a fault was on ``slot`` and not undone yet (give or take a second) at some time
    from ``start`` to ``end``."""
    end = start if end is None else end
    return any(
        slot in k.slots and k.t - 1 <= end and start <= k.t + (k.back_s or BACK_LIMIT_S) + 1
        for k in soak.kills
    )


def _commit() -> str:
    proc = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return proc.stdout.strip()


def rss_report(samples: Sequence[RssSample], until: float) -> dict[str, Any]:
    """Per slot: first, last and max RSS; per process that lived long enough under load
    (``until``: the end of the submissions) to be judged, the high-water marks of the two
    halves of its life from WARM_S on; flat when no process grew past the bound."""
    slots: dict[str, list[RssSample]] = defaultdict(list)
    for sample in samples:
        slots[sample.slot].append(sample)
    out: dict[str, Any] = {}
    judged, grew = 0, []
    for slot, series in sorted(slots.items()):
        processes: dict[int, list[RssSample]] = defaultdict(list)
        for sample in series:
            processes[sample.pid].append(sample)
        lives = []
        for pid, life in processes.items():
            born = life[0].t
            span = [s for s in life if s.t - born >= WARM_S and s.t <= until]
            if len(span) < 4 or span[-1].t - span[0].t < JUDGED_S:
                continue
            middle = (span[0].t + span[-1].t) / 2
            start = max(s.mb for s in span if s.t <= middle)
            end = max(s.mb for s in span if s.t > middle)
            flat = end - start <= max(FLAT_MB, FLAT_FRACTION * start)
            judged += 1
            if not flat:
                grew.append(f"{slot} pid {pid}")
            lives.append(
                {
                    "pid": pid,
                    "judged_s": [round(span[0].t, 1), round(span[-1].t, 1)],
                    "first_half_max_mb": round(start, 1),
                    "second_half_max_mb": round(end, 1),
                    "flat": flat,
                }
            )
        out[slot] = {
            "first_mb": series[0].mb,
            "last_mb": series[-1].mb,
            "max_mb": max(s.mb for s in series),
            "processes": len(processes),
            "judged": lives,
        }
    verdict = (
        "not judged (no process lived long enough)"
        if not judged
        else ("flat" if not grew else f"grew: {', '.join(grew)}")
    )
    return {"verdict": verdict, "processes_judged": judged, "slots": out}


def failure(sub: Submission, soak: Soak, logs: Sequence[tuple[str, Path]]) -> dict[str, Any]:
    """What there is to know about a run that was not exact."""
    end = sub.end if sub.end is not None else soak.now()
    during = [k for k in soak.kills if sub.start <= k.t <= end]
    kills = [
        {"t": k.t, "action": k.action, "slots": k.slots, "master_of": k.run_id} for k in during
    ]
    windows = [(k.wall - 1, k.wall + (k.back_s or 0.0) + KILL_WINDOW_S) for k in during]
    lines = log_lines(logs, sub.run_id, windows)
    return {
        "n": sub.n,
        "run_id": sub.run_id,
        "argv": " ".join(sub.argv),
        "outcome": sub.outcome,
        "why": sub.why,
        "submitted_to": sub.to,
        "start": round(sub.start, 1),
        "end": round(end, 1),
        "kills_during": kills,
        "client_stderr": sub.stderr_tail,
        "log_lines": lines,
        "status_at_end": soak.final_status.get(sub.run_id),
    }


# Daemon log lines left out of a failure's: an SPMD run's entity moves (dozens a second).
NOISE = re.compile(r"proposing entity|moving entity")
# Lines about recovery, quoted when they come during a fault during the run or within
# KILL_WINDOW_S s after it.
RECOVERY = re.compile(r"WARNING|ERROR|is dead|newer instance|suspecting|taking over|, master ")
KILL_WINDOW_S = 20.0


def log_lines(
    logs: Sequence[tuple[str, Path]], run_id: str, windows: Sequence[tuple[float, float]]
) -> list[str]:
    """The daemon log lines (all files, in time order) that name ``run_id``, and those about
    recovery in ``windows`` (time.time() intervals)."""
    found: list[tuple[str, str]] = []
    for name, log in logs:
        for line in log.read_text(errors="replace").splitlines():
            if NOISE.search(line):
                continue
            if run_id and run_id in line:
                found.append((line, name))
            elif windows and RECOVERY.search(line):
                try:
                    stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
                except ValueError:
                    continue
                if any(low <= stamp <= high for low, high in windows):
                    found.append((line, name))
    found.sort()
    lines = [f"{name}: {line}" for line, name in found]
    if len(lines) <= LOG_LINES:
        return lines
    # The first lines and the last: a stuck run's story is often in how it ended.
    head = LOG_LINES // 3
    tail = LOG_LINES - head
    return [*lines[:head], f"... {len(lines) - LOG_LINES} more", *lines[-tail:]]


def tracebacks(logs: Sequence[tuple[str, Path]]) -> list[dict[str, str]]:
    """Python tracebacks in the daemon logs: a peer's thread (its compute thread) that died of
    an exception prints one, unprefixed, to the daemon's stderr. Each with the time of the log
    line before it, its first line (which thread) and its last (the exception)."""
    found = []
    for name, log in logs:
        lines = log.read_text(errors="replace").splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("Traceback (most recent call last)"):
                continue
            head = lines[i - 1] if i and lines[i - 1].startswith("Exception in") else ""
            before = next((x[:23] for x in reversed(lines[:i]) if x[:4].isdigit()), "")
            end = next(
                (x for x in lines[i + 1 :] if x and not x.startswith((" ", "\t"))), "(no end)"
            )
            found.append({"log": name, "after": before, "thread": head, "exception": end})
    return found


def fault_table(s: dict[str, Any]) -> list[str]:
    """Per fault: how long it lasted, and how long until the runs in flight answered (from its
    start, from its end) and, on a testbed, until one system again."""

    def cell(v: dict[str, Any] | None, runs: bool = False) -> str:
        if not v or not v["n"]:
            return "-"
        return f"{v['median']}, {v['max']}" + (f" ({v['n']})" if runs else "")

    testbed = s["at_end"] is not None
    out = [
        "",
        "| fault | n | undone after s | runs in flight answered, s after its start (runs) "
        "| after its end |" + (" one system, s after its end |" if testbed else ""),
        "|---|---|---|---|---|" + ("---|" if testbed else ""),
    ]
    for what in [*sorted(s["kills"]), "all"]:
        row = (
            f"| {what} | {s['kills'].get(what, sum(s['kills'].values()))} "
            f"| {cell(s['undone_after_s'].get(what))} "
            f"| {cell(s['answer_after_kill_s'].get(what), True)} "
            f"| {cell(s['answer_after_undone_s'].get(what))} |"
        )
        if testbed:
            one = s["one_system_after_fault_s"].get(what)
            late = (
                f" ({one['not_within_limit']} not within the limit)"
                if one and one["not_within_limit"]
                else ""
            )
            row += f" {cell(one)}{late} |"
        out.append(row)
    return out


def summary_text(result: dict[str, Any]) -> str:
    s, c = result["summary"], result["config"]
    out = [
        f"satind chaos soak ({c['mode']}): {c['daemons']} machines x "
        f"{c['peers_per_machine']} peers, {c['clients']} clients, "
        f"{c['minutes']:g} min, seed {c['seed']}, {result['machine']['cores']} cores, "
        f"commit {result['commit']}",
        f"runs: {s['runs']}: "
        + ", ".join(f"{s[o]} {o}" for o in OUTCOMES)
        + (f", {s['abandoned']} abandoned (interrupted)" if s["abandoned"] else ""),
    ]
    for why, n in sorted(s["refused_because"].items(), key=lambda x: -x[1]):
        out.append(f"  refused {n} x: {why}")
    kills = ", ".join(f"{n} {what}" for what, n in sorted(s["kills"].items()))
    back = s["back_after_kill_s"]
    out.append(
        f"kills: {sum(s['kills'].values())} ({kills or 'none'}); undone (a new process in the "
        f"slot, the machine up, healed, resumed) after median {back['median']} s, "
        f"max {back['max']} s"
    )
    for what, v in s["exact_wall_s"].items():
        out.append(f"  exact runs {what}: median {v['median']} s, max {v['max']} s ({v['n']})")
    out.append(f"  jobs restarted in all: {s['jobs_restarted']}")
    out.extend(fault_table(s))
    end = s["at_end"]
    if end is not None:
        out.append("")
        out.append(
            f"one system at the end: {'yes' if end['one_system'] else 'NO'}"
            + (
                f", {end['after_last_fault_s']} s after the last fault was undone"
                if end["after_last_fault_s"] is not None
                else ""
            )
        )
        out.extend(f"  {line}" for line in end["split"].splitlines())
    out.extend(f"  the killer failed at {why}" for why in s["killer_errors"])
    for tb in result["tracebacks"]:
        out.append(
            f"TRACEBACK in {tb['log']} after {tb['after']}: {tb['thread']} {tb['exception']}"
        )
    out.append("")
    out.append(
        "| workload | kind | runs | exact | wrong | lost | stuck | refused | wall s (median, max) |"
    )
    out.append("|---|---|---|---|---|---|---|---|---|")
    for w in result["workloads"]:
        wall = w["wall_s"]
        out.append(
            f"| `{w['argv']}` | {w['kind']} | {w['runs']} | "
            + " | ".join(str(w[o]) for o in OUTCOMES)
            + f" | {wall['median']}, {wall['max']} |"
        )
    out.append("")
    rss = s["rss"]
    out.append(f"RSS: {rss['verdict']} ({rss['processes_judged']} processes judged)")
    out.append(
        "| slot | first MB | last MB | max MB | processes | high-water MB, 1st -> 2nd half |"
    )
    out.append("|---|---|---|---|---|---|")
    for slot, v in rss["slots"].items():
        lives = (
            ", ".join(f"{j['first_half_max_mb']} -> {j['second_half_max_mb']}" for j in v["judged"])
            or "-"
        )
        out.append(
            f"| {slot} | {v['first_mb']} | {v['last_mb']} | {v['max_mb']} | {v['processes']} "
            f"| {lives} |"
        )
    for f in result["failures"]:
        out.append("")
        out.append(
            f"{f['outcome'].upper()} run {f['n']} {f['run_id'] or '(no id)'}: {f['argv']} to "
            f"{f['submitted_to']}, {f['start']} s -> {f['end']} s: {f['why']}"
        )
        for k in f["kills_during"]:
            master = f" (master of {k['master_of']})" if k["master_of"] else ""
            out.append(f"  kill at {k['t']:.1f} s: {k['action']} {', '.join(k['slots'])}{master}")
        out.extend(f"  client: {line}" for line in f["client_stderr"][-3:])
        logged = f["log_lines"]  # the first and the last (log_lines)
        shown = logged if len(logged) <= 30 else [*logged[:10], "[...]", *logged[-20:]]
        out.extend(f"  log: {line}" for line in shown)
    out.append("")
    out.append(f"work directory (keys, daemon logs): {result['workdir']}")
    return "\n".join(out)


# -- command line -----------------------------------------------------------------------------


@contextmanager
def terminated_as_interrupt() -> Iterator[None]:
    """SIGTERM ends the soak as Ctrl-C does: everything it started is stopped."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def open_machines(args: argparse.Namespace, workdir: Path) -> Iterator[Machines]:
    """The machines the soak runs on, stopped (and on a testbed removed) at the end."""
    # Modules beside this file; the testbed's needs pyroute2 and root.
    if args.testbed:
        import soak_testbed

        with soak_testbed.testbed(workdir, args.daemons, args.peers) as bed:
            yield bed
        return
    import soak_loopback

    with soak_loopback.loopback(workdir / "keys", args.daemons) as daemons:
        yield daemons


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--minutes", type=float, default=10.0, help="how long runs are submitted (default 10)"
    )
    parser.add_argument(
        "--testbed",
        action="store_true",
        help="on a testbed's machines (network namespaces; needs root) with their faults",
    )
    parser.add_argument(
        "--daemons",
        type=int,
        help="machines (default 2 of two peers on loopback, 2 or 3; 4 on a testbed)",
    )
    parser.add_argument(
        "--peers", type=int, default=2, help="peers per machine on a testbed (default 2)"
    )
    parser.add_argument(
        "--dir", type=Path, help="the work directory (default: a new one under the temp dir)"
    )
    parser.add_argument(
        "--clients", type=int, default=3, help="client threads submitting runs (default 3)"
    )
    parser.add_argument(
        "--seed", type=int, default=1, help="the workload, target and kill choices (default 1)"
    )
    parser.add_argument(
        "--out", type=Path, help="write the JSON report here (default: soak.json in the work dir)"
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=300.0,
        help="seconds a run may take before it counts as stuck (default 300)",
    )
    parser.add_argument(
        "--kill-every",
        type=float,
        nargs=2,
        default=(30.0, 60.0),
        metavar=("MIN", "MAX"),
        help="seconds between kills, drawn uniformly (default 30 60)",
    )
    parser.add_argument(
        "--rss-every", type=float, default=10.0, help="seconds between RSS samples (default 10)"
    )
    parser.add_argument(
        "--no-kills", action="store_true", help="kill nothing (the same load, no faults)"
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="PLUGIN",
        choices=sorted({w.argv[0] for w in WORKLOADS}),
        help="submit only these plugins' workloads (to chase one failure)",
    )
    args = parser.parse_args(argv)
    if args.daemons is None:
        args.daemons = 4 if args.testbed else 2
    if not args.testbed and (args.daemons not in (2, 3) or args.peers != 2):
        parser.error("on loopback: --daemons 2 or 3, two peers each")
    if args.daemons < 2 or args.peers < 1:
        parser.error("--daemons at least 2, --peers at least 1")
    if args.minutes <= 0 or args.clients < 1 or args.deadline <= 0:
        parser.error("--minutes and --deadline must be positive, --clients at least 1")
    if not 0 < args.kill_every[0] <= args.kill_every[1]:
        parser.error("--kill-every MIN MAX: 0 < MIN <= MAX")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python benchmarks/soak.py " + " ".join(sys.argv[1:] if argv is None else argv)
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="satind-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"satind soak: work directory {workdir}", file=sys.stderr, flush=True)
    soak: Soak | None = None
    interrupted = False
    with terminated_as_interrupt():
        try:
            with open_machines(args, workdir) as machines:
                soak = Soak(args, machines)
                try:
                    soak.run()
                finally:
                    soak.abandon()
        except KeyboardInterrupt:
            interrupted = True
            print("satind soak: interrupted; everything it started is stopped", file=sys.stderr)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # abandon() ignored it
    if soak is None:
        return 1
    result = report(soak, workdir, command)
    result["interrupted"] = interrupted
    out = args.out or workdir / "soak.json"
    out.write_text(json.dumps(result, indent=1))
    print(summary_text(result))
    print(f"JSON: {out}")
    failed = sum(result["summary"][o] for o in FAILURES)
    return 1 if failed or interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
