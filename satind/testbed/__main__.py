"""``python -m satind.testbed``: make a testbed of machines, fault it, remove it.

python -m satind.testbed up 4 --peers 2          # 4 machines, prints how to reach them
python -m satind.testbed crash m2                # every process of m2 SIGKILLed
python -m satind.testbed start m2                # m2's daemon again (same name, same IP)
python -m satind.testbed cut m1,m2 m3,m4         # a partition (--one-way: m1,m2 -> m3,m4)
python -m satind.testbed heal
python -m satind.testbed down
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from satind.testbed.machines import Testbed, status_of
from satind.testbed.network import TestbedUnavailable

DEFAULT_DIR = Path("/tmp/satind-testbed")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m satind.testbed",
        description=(
            "A testbed of machines on this host: each a network namespace with its own IP on a "
            "bridge, running `satind start` with the shipped defaults on 0.0.0.0:7420. Needs "
            "root (CAP_NET_ADMIN) and pyroute2 (pip install 'satind[testbed]'). docs/testbed.md "
            "says more."
        ),
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_DIR,
        help=f"the testbed's directory: keys, each machine's log and state (default {DEFAULT_DIR})",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, parents=[common])

    up = add("up", "make COUNT machines and start their daemons")
    up.add_argument("count", type=int)
    up.add_argument("--peers", type=int, default=2, help="peers per machine (default 2)")
    up.add_argument("--clusters", type=int, default=1, help="machine i in cluster c{i %% N}")
    up.add_argument(
        "--seeds",
        choices=["first", "all"],
        default="first",
        help="first: the first machine has no seeds, the others are seeded with it "
        "(README.md's set-up, the default); all: each is seeded with every other",
    )
    up.add_argument("--checkpoints", action="store_true", help="--checkpoint-dir per machine")
    add("down", "kill every process of every machine, remove the network")
    add("status", "the machines, their processes, cuts and throttles")
    for verb, what in (
        ("crash", "SIGKILL every process of MACHINE"),
        ("start", "start MACHINE's daemon (after a crash or stop)"),
        ("restart", "crash MACHINE, then start it"),
        ("stop", "`satind stop` MACHINE, gracefully"),
        ("pause", "SIGSTOP every process of MACHINE"),
        ("resume", "SIGCONT every process of MACHINE"),
    ):
        add(verb, what).add_argument("machine")
    kill = add("kill-peer", "SIGKILL one peer process (its daemon restarts it)")
    kill.add_argument("slot", help="e.g. m2/1")
    for verb, what in (("cut", "drop every packet"), ("throttle", "limit the rate")):
        p = add(verb, f"{what} between two sets of machines")
        p.add_argument("a", help="machines, comma-separated")
        p.add_argument("b", help="machines, comma-separated")
        p.add_argument("--one-way", action="store_true", help="only from a to b")
        if verb == "throttle":
            p.add_argument("--rate", type=int, required=True, help="bit/s")
    heal = add("heal", "undo cuts and throttles (all, or between A and B)")
    heal.add_argument("a", nargs="?")
    heal.add_argument("b", nargs="?")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # After "--": more `satind start` options for every machine (`up` only).
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    args = _parser().parse_args(argv)
    try:
        if args.command == "up":
            bed = Testbed.up(
                args.count,
                args.dir,
                peers=args.peers,
                clusters=args.clusters,
                seeds=args.seeds,
                extra=extra,
                checkpoints=args.checkpoints,
            )
            print(bed.describe())
            return 0
        try:
            bed = Testbed.load(args.dir)
        except FileNotFoundError:
            print(f"no testbed in {args.dir} (make one with `up`)", file=sys.stderr)
            return 1
        return _act(bed, args)
    except TestbedUnavailable as exc:
        print(f"no testbed: {exc}", file=sys.stderr)
        return 1
    except (ValueError, LookupError, RuntimeError, AssertionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _act(bed: Testbed, args: argparse.Namespace) -> int:
    def machines(text: str) -> list[str]:
        return [m for m in text.split(",") if m]

    if args.command == "down":
        bed.down()
        print(f"testbed {bed.network.index} removed (its directory {bed.root} is kept)")
    elif args.command == "status":
        print(json.dumps(status_of(bed) | {"shaped": bed.network.shaped()}, indent=1))
    elif args.command == "crash":
        bed.crash(args.machine)
    elif args.command == "start":
        bed.start(args.machine)
    elif args.command == "restart":
        bed.restart(args.machine)
    elif args.command == "stop":
        bed.stop(args.machine)
    elif args.command == "pause":
        bed.pause(args.machine)
    elif args.command == "resume":
        bed.resume(args.machine)
    elif args.command == "kill-peer":
        print(bed.kill_peer(args.slot))
    elif args.command == "cut":
        bed.cut(machines(args.a), machines(args.b), both=not args.one_way)
    elif args.command == "throttle":
        bed.throttle(machines(args.a), machines(args.b), args.rate, both=not args.one_way)
    elif args.command == "heal":
        a = machines(args.a) if args.a else None
        b = machines(args.b) if args.b else None
        bed.heal(a, b)
    bed.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
