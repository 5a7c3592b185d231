"""The protocol core: every decision of a peer, as ``handle(state, event, now) -> effects``
(core/handle.py), sans I/O — no trio, socket, thread, clock, logging or unseeded randomness in
its whole import closure (pyproject.toml's core-threads, core-clock and core-engine contracts,
which allow no indirect import).

h11's rule: a peer's state (core/state.py ``PeerState``) changes only inside ``handle``. What
the node learns — a member's message, a procedure's outcome (a submission parsed, a run
judged), a drain's step, a fact about its own peer — arrives as an event (core/events.py); the
effects say what to do about it (core/effects.py). A debug write barrier (core/barrier.py,
on in the suite's tests/core and tests/sim) fails a test that writes the state elsewhere.

The face the rest of satind is meant to use: this package's ``handle``, ``events``,
``effects`` and ``state`` modules (read-only for anyone but ``handle``'s rules) and
``model``. The rule modules are the core's own; the imports from outside that still reach
past the face are listed by ``python ../shared/tools/house.py .`` (issue 47 tracks them).
"""
