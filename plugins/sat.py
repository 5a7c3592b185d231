"""sat FILE.cnf | sat random VARS SEED: satisfiability by DPLL, splitting on variables.

A node simplifies the formula by unit propagation, picks the unassigned variable that occurs
most often, and splits: one child assumes it true, the other false. The first SPAWN_DEPTH
splits are spawned, speculatively: a branch that finds a model raises ``Satisfied`` (its type
registered, so it crosses peers as itself), its parent's inlet aborts the sibling branch and
passes the model up, and the whole search stops at the first model found
(satin-grid-programming-model §3.3, Fig 2); below SPAWN_DEPTH a node searches sequentially.
Which model is found first depends on the schedule; the check verifies it against every
clause. Without satind (or with ``engine.aborts = false``) both branches always run and the
true branch's model wins.

Result: a sorted list of literals (a model: variable v true is v, false is -v) or None for
UNSAT. The check verifies a model against every clause (a certificate); an UNSAT answer has
none, so up to CHECK_UNSAT_VARS variables the check evaluates every clause on all 2^VARS
assignments at once (one bit each in a Python integer) and finds none that satisfies them
all; above, the run says "not checked".
``random VARS SEED`` makes a random 3-SAT formula with round(4.26 * VARS) clauses, the ratio
where random 3-SAT is hardest.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from satind import (
    NotChecked,
    Plugin,
    UsageError,
    abort,
    input_file,
    register_type,
    spawnable,
    sync,
)

from ._args import at_most, int_arg

SPAWN_DEPTH = 8
# Variables up to which the check confirms an UNSAT answer on every assignment: 22 take about
# 0.1 s and 15 MB (24: 0.6 s and 100 MB; the time and memory double with each variable).
CHECK_UNSAT_VARS = 22

Clauses = tuple[tuple[int, ...], ...]
Model = tuple[int, ...]


def random_3sat(variables: int, seed: int) -> Clauses:
    rng = random.Random(seed)
    clauses = []
    for _ in range(round(4.26 * variables)):
        chosen = rng.sample(range(1, variables + 1), 3)
        clauses.append(tuple(v if rng.random() < 0.5 else -v for v in chosen))
    return tuple(clauses)


def parse_dimacs(text: str, source: str = "<cnf>") -> tuple[int, Clauses]:
    """Parse DIMACS CNF.

    Raises:
        UsageError: the text is not valid DIMACS, naming the line.
    """
    variables = -1
    declared = -1
    clauses: list[tuple[int, ...]] = []
    current: list[int] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "c%":
            if line.startswith("%"):
                break  # SATLIB files end with "%"
            continue
        if line.startswith("p"):
            parts = line.split()
            if len(parts) != 4 or parts[1] != "cnf":
                raise UsageError(f"{source}:{number}: expected 'p cnf VARIABLES CLAUSES'")
            try:
                variables, declared = int(parts[2]), int(parts[3])
            except ValueError:
                raise UsageError(f"{source}:{number}: bad problem line {line!r}") from None
            continue
        if variables < 0:
            raise UsageError(f"{source}:{number}: clause before the 'p cnf' line")
        for token in line.split():
            try:
                literal = int(token)
            except ValueError:
                raise UsageError(f"{source}:{number}: {token!r} is not a literal") from None
            if abs(literal) > variables:
                raise UsageError(
                    f"{source}:{number}: literal {literal} exceeds {variables} variables"
                )
            if literal == 0:
                clauses.append(tuple(current))
                current = []
            else:
                current.append(literal)
    if current:
        clauses.append(tuple(current))
    if variables < 0:
        raise UsageError(f"{source}: no 'p cnf' line")
    if declared >= 0 and declared != len(clauses):
        raise UsageError(f"{source}: declares {declared} clauses but has {len(clauses)}")
    return variables, tuple(clauses)


def simplify(clauses: Clauses, literal: int) -> Clauses | None:
    """Clauses with ``literal`` true; None when a clause becomes empty (a conflict)."""
    out = []
    for clause in clauses:
        if literal in clause:
            continue
        if -literal in clause:
            reduced = tuple(x for x in clause if x != -literal)
            if not reduced:
                return None
            out.append(reduced)
        else:
            out.append(clause)
    return tuple(out)


def propagate(clauses: Clauses, assigned: Model) -> tuple[Clauses, Model] | None:
    """Unit propagation to a fixpoint; None on conflict."""
    model = list(assigned)
    while True:
        unit = next((c[0] for c in clauses if len(c) == 1), None)
        if unit is None:
            return clauses, tuple(model)
        model.append(unit)
        reduced = simplify(clauses, unit)
        if reduced is None:
            return None
        clauses = reduced


def choose(clauses: Clauses) -> int:
    """The variable occurring most often (ties to the smallest), as a positive literal."""
    counts: dict[int, int] = {}
    for clause in clauses:
        for literal in clause:
            v = abs(literal)
            counts[v] = counts.get(v, 0) + 1
    return min(counts, key=lambda v: (-counts[v], v))


def solve_seq(clauses: Clauses, model: Model) -> Model | None:
    state = propagate(clauses, model)
    if state is None:
        return None
    clauses, model = state
    if not clauses:
        return model
    v = choose(clauses)
    for literal in (v, -v):
        reduced = simplify(clauses, literal)
        if reduced is not None:
            found = solve_seq(reduced, (*model, literal))
            if found is not None:
                return found
    return None


class Satisfied(Exception):
    """A model, found: raised by the branch that found it, caught by its parent's inlet."""

    def __init__(self, model: Sequence[int]) -> None:
        super().__init__(f"a model of {len(model)} variables")
        self.model = tuple(model)


register_type(Satisfied, 40010, lambda e: list(e.model), Satisfied)


@spawnable
def solve(clauses: Clauses, model: Model, variables: int, depth: int) -> Model | None:
    """The run's root: the first model any branch finds, or None (UNSAT)."""
    try:
        search(clauses, model, variables, depth)  # a plain call: its spawns are this job's
    except Satisfied as found:
        return found.model
    return None


@spawnable
def search(clauses: Clauses, model: Model, variables: int, depth: int) -> None:
    """Raises Satisfied with a full model if this branch has one; returns if it has none."""
    if depth == 0:
        found = solve_seq(clauses, model)
        if found is not None:
            raise Satisfied(complete(found, variables))
        return
    state = propagate(clauses, model)
    if state is None:
        return
    clauses, model = state
    if not clauses:
        raise Satisfied(complete(model, variables))
    v = choose(clauses)
    first: list[Satisfied] = []

    def inlet(exc: Exception) -> None:
        if not isinstance(exc, Satisfied):
            raise exc  # a real failure: this branch fails with it
        if not first:
            first.append(exc)
            abort()  # the other branch is useless now

    for literal in (v, -v):
        reduced = simplify(clauses, literal)
        if reduced is not None:
            search.spawn_inlet(inlet, reduced, (*model, literal), variables, depth - 1)
    sync()
    if first:
        raise first[0]


def complete(model: Model, variables: int) -> Model:
    """A full assignment: variables the search left free are set true; sorted by variable."""
    chosen = {abs(x): x for x in model}
    return tuple(chosen.get(v, v) for v in range(1, variables + 1))


def parse(argv: Sequence[str]) -> tuple[Clauses, Model, int, int]:
    if not argv:
        raise UsageError("give a DIMACS file or 'random VARS SEED'")
    if argv[0] == "random":
        at_most(argv, 3)
        variables = int_arg(argv, 1, "VARS", low=1, high=100_000)
        seed = int_arg(argv, 2, "SEED", low=0, high=2**63)
        return random_3sat(variables, seed), (), variables, SPAWN_DEPTH
    at_most(argv, 1)
    # The client's file (sent with the submission), never a path opened on the peer.
    data = input_file(argv[0])
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise UsageError(f"{argv[0]} is not a text file (byte {exc.start})") from None
    variables, clauses = parse_dimacs(text, argv[0])
    return clauses, (), variables, SPAWN_DEPTH


def verify(clauses: Clauses, model: Model) -> bool:
    true = set(model)
    if any(-literal in true for literal in true):
        return False  # a variable both true and false is no assignment
    return all(any(literal in true for literal in clause) for clause in clauses)


def satisfiable_by_table(clauses: Clauses, variables: int) -> bool:
    """Whether some assignment satisfies every clause, tried on all 2^variables at once: bit
    a of an integer stands for assignment a (variable i true when bit i-1 of a is set); a
    clause's integer has the bits of the assignments that satisfy it, and their AND those of
    the models. Independent of the DPLL search."""
    size = 1 << variables
    full = (1 << size) - 1
    masks = []
    for i in range(variables):
        block = 1 << i
        mask = ((1 << block) - 1) << block  # block assignments with i false, then true
        length = 2 * block
        while length < size:
            mask |= mask << length
            length *= 2
        masks.append(mask)
    alive = full
    for clause in clauses:
        sat = 0
        for literal in clause:
            mask = masks[abs(literal) - 1]
            sat |= mask if literal > 0 else full ^ mask
        alive &= sat
        if not alive:
            return False
    return True


def check(args: tuple[object, ...], result: Model | None) -> None:
    clauses, variables = args[0], args[2]
    assert isinstance(clauses, tuple) and isinstance(variables, int)
    if result is not None:
        if not verify(clauses, tuple(result)):
            raise AssertionError("the model does not satisfy every clause")
        return
    if variables > CHECK_UNSAT_VARS:
        raise NotChecked(
            f"UNSAT with {variables} variables: an UNSAT answer has no certificate, and the "
            f"check tries every assignment up to {CHECK_UNSAT_VARS} variables"
        )
    if satisfiable_by_table(clauses, variables):
        raise AssertionError("the formula is satisfiable: some assignment satisfies every clause")


def report(argv: Sequence[str], result: Model | None) -> dict[str, object]:
    if result is None:
        return {"sat": False}
    return {"sat": True, "model": list(result)}


PLUGIN = Plugin(
    name="sat",
    entry=solve,
    usage="sat FILE.cnf | sat random VARS SEED",
    parse=parse,
    max_branching=2,
    check=check,
    report=report,
    description="DPLL satisfiability; SAT with a verified model, or UNSAT",
)
