"""Fault-tolerance experiments with real peer processes (the shape of satin-fault-tolerance
Figure 4 and Table 2): `satind start` daemons on this machine, one per "cluster", peers
computing a `tree` whose leaves sleep (so that 16 peers fit 2 cores).

* Figure 4 (a): 2 clusters of 8 peers; at half the fault-free time one cluster goes: (a) its
  peers are SIGKILLed, naive mode (`ft.orphans = false`); (b) SIGKILLed, orphan saving;
  (c) drained (`satind drain --cluster`); (d) 8 + 4 peers, no one leaves.
* Figure 4 (b): migration, 4 clusters of 4 peers: at half time a fifth joins and one of the
  four drains, against no migration.
* Table 2: jobs in orphan tables, reused, for the run's master alive (the killed cluster is
  not the master's) and dead (it is).

    python benchmarks/recovery_procs.py [--repeat 3] [--tree 4,8,40]

    python benchmarks/recovery_procs.py --issue31 [--repeat 3] [--tree 4,8,40]
        the rows of issue 31: (b) with checkpoints read by the survivors (policies tic and
        sel on a directory both machines share), and the leave with deadline 0 against the
        drain that finishes its work, for (c) and for migration

The time is the submitter's wall time from submission to result (the run's own elapsed_s
restarts at a master takeover). Medians of --repeat runs, variants interleaved.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FAST = """
[membership]
probe_interval_s = 0.5
suspicion_mult = 3

[daemon]
restart = false

[ft]
orphans = {orphans}
"""


def satind(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "satind", *args], capture_output=True, text=True, timeout=timeout
    )


def children_of(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
                out.append(int(entry.name))
    return out


class Machine:
    """One `satind start` (a cluster of peers), started by this script and stopped by it."""

    def __init__(self, keys: Path, name: str, peers: int, config: Path, seeds: str) -> None:
        self.name = name
        self.log = keys / f"{name}.log"
        cmd = [sys.executable, "-m", "satind", "start", "--keys", str(keys), "--name", name]
        cmd += ["--cluster", name, "--listen", "127.0.0.1:0", "--peers", str(peers)]
        cmd += ["--config", str(config)] + (["--seeds", seeds] if seeds else [])
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log.open("w"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = re.search(rf"satind {name} \(cluster \w+\): (.*)", self.log.read_text())
            if found:
                self.first = found.group(1).split(", ")[0].split("=")[1]
                self.peers = children_of(self.proc.pid)
                return
            time.sleep(0.1)
        raise RuntimeError(f"{name} did not start: {self.log.read_text()[-2000:]}")

    def kill_peers(self) -> None:
        for pid in self.peers:
            os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        self.proc.kill()
        for pid in self.peers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


def client(keys: Path, to: str, *args: str) -> subprocess.CompletedProcess[str]:
    return satind(*args, "--to", to, "--keys", str(keys))


def alive_count(keys: Path, to: str) -> int:
    proc = client(keys, to, "status", "--json")
    if proc.returncode != 0:
        return 0
    return sum(p["state"] == "alive" for p in json.loads(proc.stdout)["peers"])


def experiment(
    keys: Path,
    sizes: dict[str, int],
    tree: list[str],
    orphans: bool = True,
    at: float | None = None,
    fault: str = "",
    join: int = 0,
    deadline: float | None = None,
    policy: str = "",
) -> dict[str, Any]:
    """Start the machines, submit to the first one's first peer, apply the fault at ``at``
    seconds; return the run's JSON with the submitter's wall time. ``deadline``: of the
    drains; ``policy``: checkpoints of that policy in a directory every machine shares."""
    config = keys / f"cfg-{orphans}-{policy}.toml"
    text = FAST.format(orphans=str(orphans).lower())
    if policy:
        ckpt = keys / f"ckpt-{time.monotonic_ns()}"
        text += f'\n[checkpoint]\ndir = "{ckpt}"\npolicy = "{policy}"\ncopies = 0\n'
        text += "interval_s = 1.0\n"
    config.write_text(text)
    drain = ["drain", "--cluster"]
    until = [] if deadline is None else ["--deadline", str(deadline)]
    machines: list[Machine] = []
    try:
        for name, peers in sizes.items():
            seeds = machines[0].first if machines else ""
            machines.append(Machine(keys, name, peers, config, seeds))
        total = sum(sizes.values())
        deadline = time.monotonic() + 60
        while alive_count(keys, machines[0].first) < total and time.monotonic() < deadline:
            time.sleep(0.3)
        first, last = machines[0], machines[-1]
        # The run's master is machines[0]/0. With "kill-master", the result is awaited at a
        # peer of the last machine instead.
        waiter = last.first if fault == "kill-master" else first.first
        run_id = client(keys, first.first, "submit", "tree", *tree).stdout.strip()
        started = time.monotonic()
        argv = ["result", run_id, "--wait", "--json", "--to", waiter, "--keys", str(keys)]
        wait = subprocess.Popen(
            [sys.executable, "-m", "satind", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if at is not None:
            time.sleep(max(0.0, started + at - time.monotonic()))
            if fault == "kill":
                last.kill_peers()
            elif fault == "kill-master":
                first.kill_peers()
            elif fault == "drain":
                client(keys, first.first, *drain, last.name, *until)
            elif fault == "migrate":
                machines.append(Machine(keys, "new", join, config, first.first))
                deadline = time.monotonic() + 30
                while alive_count(keys, first.first) < total + join:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                client(keys, first.first, *drain, last.name, *until)
        out, err = wait.communicate(timeout=600)
        wall = time.monotonic() - started
        if wait.returncode != 0:
            raise RuntimeError(f"run failed: {err[-2000:]}")
        report: dict[str, Any] = json.loads(out)
        report["wall_s"] = wall
        return report
    finally:
        for machine in machines:
            machine.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tree", default="4,8,40", help="DEPTH,BRANCHING,LEAF_MS")
    parser.add_argument("--plot", default="docs/recovery-procs.png")
    parser.add_argument("--issue31", action="store_true", help="the rows of issue 31")
    args = parser.parse_args()
    tree = [*args.tree.split(","), "sleep"]
    if args.issue31:
        issue31(args.repeat, args.tree, tree)
        return
    print(
        f"command: python benchmarks/recovery_procs.py --repeat {args.repeat} --tree {args.tree}\n"
    )
    two = {"east": 8, "west": 8}
    four = {"c0": 4, "c1": 4, "c2": 4, "c3": 4}
    rows: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        keys = Path(tmp)
        assert satind("keys", "init", tmp).returncode == 0
        for name in ("east", "west", "c0", "c1", "c2", "c3", "new"):
            assert satind("keys", "issue", tmp, name).returncode == 0
        for rep in range(args.repeat):
            full = experiment(keys, two, tree)
            half = full["wall_s"] / 2
            stay = experiment(keys, four, tree)
            variants = {
                "2 clusters, no one leaves": full,
                "(a) crash, naive recomputation": experiment(
                    keys, two, tree, orphans=False, at=half, fault="kill"
                ),
                "(b) crash, orphan saving": experiment(keys, two, tree, at=half, fault="kill"),
                "(c) graceful leave (drain)": experiment(keys, two, tree, at=half, fault="drain"),
                "(d) 1.5 clusters, no one leaves": experiment(keys, {"east": 8, "west": 4}, tree),
                "no migration (4 x 4)": stay,
                "migration (replace 1 of 4 clusters)": experiment(
                    keys, four, tree, at=stay["wall_s"] / 2, fault="migrate", join=4
                ),
                "master dies (east killed), orphan saving": experiment(
                    keys, two, tree, at=half, fault="kill-master"
                ),
            }
            for label, report in variants.items():
                rows.setdefault(label, []).append(report)
                print(f"repeat {rep + 1}: {label}: {report['wall_s']:.2f} s", flush=True)

    def med(label: str, key: Any) -> float:
        return statistics.median(key(r) for r in rows[label])

    print("\n| variant | time (s, median) | jobs restarted | tuples sent | results reused |")
    print("|---|---|---|---|---|")
    for label in rows:
        print(
            f"| {label} | {med(label, lambda r: r['wall_s']):.2f} | "
            f"{med(label, lambda r: r['stats'].get('jobs_restarted', 0)):g} | "
            f"{med(label, lambda r: r['stats'].get('tuples_sent', 0)):g} | "
            f"{med(label, lambda r: r['stats'].get('results_reused', 0)):g} |"
        )
    a = med("(a) crash, naive recomputation", lambda r: r["wall_s"])
    b = med("(b) crash, orphan saving", lambda r: r["wall_s"])
    c = med("(c) graceful leave (drain)", lambda r: r["wall_s"])
    d = med("(d) 1.5 clusters, no one leaves", lambda r: r["wall_s"])
    s = med("no migration (4 x 4)", lambda r: r["wall_s"])
    mg = med("migration (replace 1 of 4 clusters)", lambda r: r["wall_s"])
    print(
        f"\n(b) vs (a): {100 * (a - b) / a:.1f}% faster (goal 25%); (c) vs (d): "
        f"{100 * (c - d) / d:+.1f}% (goal within 8%); migration overhead "
        f"{100 * (mg - s) / s:+.1f}% (goal under 2%)"
    )
    times = {label: med(label, lambda r: r["wall_s"]) for label in rows}
    plot(times, Path(__file__).resolve().parent.parent / args.plot)
    print(f"\nplot: {args.plot}")


def issue31(repeat: int, spec: str, tree: list[str]) -> None:
    print(
        f"command: python benchmarks/recovery_procs.py --issue31 --repeat {repeat} --tree {spec}\n"
    )
    two = {"east": 8, "west": 8}
    four = {"c0": 4, "c1": 4, "c2": 4, "c3": 4}
    rows: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        keys = Path(tmp)
        assert satind("keys", "init", tmp).returncode == 0
        for name in ("east", "west", "c0", "c1", "c2", "c3", "new"):
            assert satind("keys", "issue", tmp, name).returncode == 0
        for rep in range(repeat):
            full = experiment(keys, two, tree)
            half = full["wall_s"] / 2
            stay = experiment(keys, four, tree)
            mid = stay["wall_s"] / 2
            variants = {
                "2 clusters, no one leaves": full,
                "(b) crash, orphan saving": experiment(keys, two, tree, at=half, fault="kill"),
                "(b) + checkpoints, tic": experiment(
                    keys, two, tree, at=half, fault="kill", policy="tic"
                ),
                "(b) + checkpoints, sel": experiment(
                    keys, two, tree, at=half, fault="kill", policy="sel"
                ),
                "(c) drain, no deadline": experiment(keys, two, tree, at=half, fault="drain"),
                "(c') leave, deadline 0": experiment(
                    keys, two, tree, at=half, fault="drain", deadline=0.0
                ),
                "(d) 1.5 clusters, no one leaves": experiment(keys, {"east": 8, "west": 4}, tree),
                "no migration (4 x 4)": stay,
                "migration, drain": experiment(keys, four, tree, at=mid, fault="migrate", join=4),
                "migration, leave with deadline 0": experiment(
                    keys, four, tree, at=mid, fault="migrate", join=4, deadline=0.0
                ),
            }
            for label, report in variants.items():
                rows.setdefault(label, []).append(report)
                print(f"repeat {rep + 1}: {label}: {report['wall_s']:.2f} s", flush=True)

    def med(label: str, key: Any) -> float:
        return statistics.median(key(r) for r in rows[label])

    print("\n| variant | time (s, median) | jobs restarted | results from logs | results reused |")
    print("|---|---|---|---|---|")
    for label in rows:
        print(
            f"| {label} | {med(label, lambda r: r['wall_s']):.2f} | "
            f"{med(label, lambda r: r['stats'].get('jobs_restarted', 0)):g} | "
            f"{med(label, lambda r: r['stats'].get('results_from_logs', 0)):g} | "
            f"{med(label, lambda r: r['stats'].get('results_reused', 0)):g} |"
        )
    d = med("(d) 1.5 clusters, no one leaves", lambda r: r["wall_s"])
    s = med("no migration (4 x 4)", lambda r: r["wall_s"])
    for label in ("(c) drain, no deadline", "(c') leave, deadline 0"):
        print(f"{label} vs (d): {100 * (med(label, lambda r: r['wall_s']) - d) / d:+.1f}%")
    for label in ("migration, drain", "migration, leave with deadline 0"):
        print(f"{label}: overhead {100 * (med(label, lambda r: r['wall_s']) - s) / s:+.1f}%")


def plot(times: dict[str, float], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\n(matplotlib not installed: pip install -e '.[bench]' for the plot)")
        return
    short = [
        "2 clusters",
        "(a) crash,\nnaive",
        "(b) crash,\norphans",
        "(c) drain",
        "(d) 1.5\nclusters",
        "4 x 4",
        "migrate\n1 of 4",
        "master\ndies",
    ]
    colors = [
        "grey",
        "tab:red",
        "tab:green",
        "tab:blue",
        "tab:orange",
        "grey",
        "tab:blue",
        "tab:purple",
    ]
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.bar(range(len(times)), list(times.values()), color=colors[: len(times)])
    ax.set_xticks(range(len(times)), short[: len(times)], fontsize=8)
    ax.set_ylabel("submit to result, wall s (median)")
    ax.set_title("satind, real processes (16 peers, sleeping tree leaves): leaving peers")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
