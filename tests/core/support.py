"""Building a peer's core state without any I/O, and a link that records what it is sent:
what the case-table tests of the core feed its handlers."""

from __future__ import annotations

from dataclasses import dataclass, field

from satind import plugin as plugins
from satind.config import Config
from satind.core.lifecycle import register
from satind.core.runs import PeerRun
from satind.core.state import PeerState
from satind.membership.view import Change, Member, MemberTable, State
from satind.net import messages as m
from satind.net.transport import Address, Identity
from satind.work.jobs import Job, RunState

PLUGINS = plugins.discover()
FIB = PLUGINS["fib"]


def member(name: str, cluster: str = "c0", state: State = State.ALIVE) -> Member:
    port = 7000 + sum(map(ord, name))
    return Member(name, Address("10.0.0.1", port), cluster, state=state, instance=1)


def make_state(me: str = "a/0", others: tuple[str, ...] = ("b/0", "c/0")) -> PeerState:
    table = MemberTable(member(me))
    table.add_known([member(name) for name in others])
    state = PeerState(me, "c0", Config(), table, dict(PLUGINS))
    state.settled = True  # a member of a system that has been up (its view is whole)
    state.run_ids = iter(f"run-{i}" for i in range(1000)).__next__
    return state


def declare(state: PeerState, name: str, new: State) -> None:
    """Change a member's state in the view (as SWIM would)."""
    known = state.table.get(name)
    assert known is not None
    state.table.apply(known.update(new, origin=state.name))


def gone(state: PeerState, name: str, new: State = State.DEAD) -> Change:
    """Declare a member gone (``new``: dead or left) and return the change SWIM reports."""
    before = state.table.get(name)
    declare(state, name, new)
    after = state.table.get(name)
    assert before is not None and after is not None
    return Change(before, after)


@dataclass
class FakeLink:
    remote_name: str
    role: str = "peer"
    up: bool = True
    posted: list[m.Message] = field(default_factory=list)
    closed: bool = False
    measured: tuple[int, float] | None = None

    @property
    def remote(self) -> Identity:
        return Identity(self.remote_name, "c0", self.role)

    def post(self, msg: m.Message) -> bool:
        if self.up:
            self.posted.append(msg)
        return self.up

    def close(self) -> None:
        self.closed = True


def info(
    run_id: str = "r1", master: str = "a/0", epoch: int = 0, argv: tuple[str, ...] = ("12",)
) -> m.RunInfo:
    args = FIB.parse_args(list(argv))
    from satind.net import codec

    return m.RunInfo(
        run_id, "fib", FIB.code_hash, list(argv), codec.encode_value(args), master, 2, epoch
    )


def known_run(state: PeerState, run_info: m.RunInfo | None = None) -> PeerRun:
    run, _ = register(state, run_info or info())
    assert run is not None
    return run


def job_of(run: RunState, args: object = (5,), parent: Job | None = None, index: int = 0) -> Job:
    job = Job(FIB.entry.fn, args, parent, index, run, 0.5)
    if parent is None:
        job.set_path(bytes([index]))
    return job
