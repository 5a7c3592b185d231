"""The availability model and heuristics of scheduling-iterative-apps-volatile-resources
(satind/volatile): Lemma 1 and Theorem 2 against Monte Carlo, the heuristics' choices on
hand-made cases, the study's simulator on a hand-computed timeline and deterministic per seed."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from satind.volatile.heuristics import NAMES, Candidate, canonical, plan
from satind.volatile.model import DOWN, RECLAIMED, UP, Chain, Estimator
from satind.volatile.platform import Params, Platform, Traces
from satind.volatile.slots import simulate
from satind.volatile.study import Instance, main, run_instance, run_study, summarize

# A worker often reclaimed, rarely down.
FLAKY = Chain(((0.6, 0.39, 0.01), (0.1, 0.89, 0.01), (0.05, 0.05, 0.9)))
STEADY = Chain(((0.99, 0.005, 0.005), (0.3, 0.69, 0.01), (0.05, 0.05, 0.9)))
ALWAYS_UP = Chain(((1.0, 0.0, 0.0), (1.0, 0.0, 0.0), (1.0, 0.0, 0.0)))


def _monte_carlo(chain: Chain, w: int, samples: int, seed: int) -> tuple[float, float]:
    """(the fraction of UP slots followed by another UP slot before a DOWN, the mean time to
    be UP ``w`` slots among the runs that do not go DOWN first)."""
    rng = random.Random(seed)
    again = 0
    for _ in range(samples):
        state = chain.step(UP, rng)
        while state == RECLAIMED:
            state = chain.step(state, rng)
        again += state == UP
    times = []
    for _ in range(samples):
        state, t, ups = UP, 1, 1
        while ups < w and state != DOWN:
            state = chain.step(state, rng)
            t += 1
            ups += state == UP
        if state != DOWN:
            times.append(t)
    return again / samples, sum(times) / len(times)


@pytest.mark.parametrize("chain", [FLAKY, STEADY, Chain.symmetric((0.9, 0.95, 0.99))])
def test_lemma_1_and_theorem_2_match_monte_carlo(chain: Chain) -> None:
    p_plus, mean = _monte_carlo(chain, 6, 40_000, seed=7)
    assert chain.p_plus() == pytest.approx(p_plus, abs=0.01)
    assert chain.expected_time(6) == pytest.approx(mean, rel=0.03)


def test_the_steady_state_and_p_ud() -> None:
    chain = Chain.symmetric((0.9, 0.95, 0.99))
    pi = chain.stationary()
    assert sum(pi) == pytest.approx(1.0)
    for j in range(3):  # π P = π
        assert sum(pi[i] * chain.p[i][j] for i in range(3)) == pytest.approx(pi[j])
    # The exact P_UD against Monte Carlo; the paper's approximation equals it after one
    # transition and stays near it (it forgets the state after the first); both fall with k.
    rng = random.Random(9)
    for k in (2, 5, 20):
        alive = 0
        for _ in range(20_000):
            state = UP
            for _ in range(k - 1):
                state = chain.step(state, rng)
                if state == DOWN:
                    break
            alive += state != DOWN
        assert chain.p_ud_exact(k) == pytest.approx(alive / 20_000, abs=0.015)
        assert chain.p_ud(k) == pytest.approx(chain.p_ud_exact(k), rel=0.2)
    assert chain.p_ud(2) == pytest.approx(chain.p_ud_exact(2))
    assert chain.p_ud(20) < chain.p_ud(5) < chain.p_ud(2) <= 1


def test_the_estimator_learns_a_chain_from_what_it_sees() -> None:
    rng = random.Random(3)
    est = Estimator()
    state = UP
    for _ in range(50_000):
        est.observe(state)
        state = FLAKY.step(state, rng)
    learned = est.chain()
    for i in range(3):
        for j in range(3):
            assert learned.p[i][j] == pytest.approx(FLAKY.p[i][j], abs=0.02)
    assert Estimator().chain().p[UP][UP] == pytest.approx(0.95)  # the prior, unseen


def test_mct_fills_the_fast_worker_until_the_slow_one_finishes_first() -> None:
    fast, slow = Candidate(0, 2, 0, STEADY), Candidate(1, 10, 0, STEADY)
    # CT of the fast one: 3, 5, 7, 9, 11 for its 1st..5th task; the slow one: 11. The tie at
    # 11 goes to the lower id.
    assert plan("mct", [fast, slow], 6, 1, 5, random.Random(0)) == [0, 0, 0, 0, 0, 1]
    # Delay counts: a fast worker busy for 20 slots loses the first task.
    busy = Candidate(0, 2, 20, STEADY)
    assert plan("mct", [busy, slow], 1, 1, 5, random.Random(0)) == [1]


def test_emct_lw_and_ud_prefer_a_steady_worker_to_a_faster_flaky_one() -> None:
    flaky, steady = Candidate(0, 4, 0, FLAKY), Candidate(1, 6, 0, STEADY)
    rng = random.Random(0)
    assert plan("mct", [flaky, steady], 1, 1, 5, rng) == [0]
    for name in ("emct", "emct*", "lw", "ud", "ud*"):
        assert plan(name, [flaky, steady], 1, 1, 5, rng) == [1], name


def test_starred_heuristics_pay_for_the_masters_contention() -> None:
    # One channel, data as long as 5 computations: a second worker's data would wait for the
    # first's, so MCT* keeps both tasks on one worker where MCT spreads them (counting the
    # worker to enrol as active, the reading under which a second worker's transfer waits).
    a, b = Candidate(0, 1, 0, ALWAYS_UP), Candidate(1, 1, 0, ALWAYS_UP)
    rng = random.Random(0)
    assert plan("mct", [a, b], 2, 5, 1, rng) == [0, 1]
    assert plan("mct*", [a, b], 2, 5, 1, rng, self_counts=True) == [0, 0]


def test_the_papers_n_active_counter_starts_at_zero() -> None:
    # Equation 2 to the letter (the default): n_active counts the workers given a task so
    # far, so the first task pays no transfer and the second worker pays one. The other
    # reading counts a worker not given one yet as active too: the second worker pays two
    # transfers, and MCT* keeps both tasks on one.
    a, b = Candidate(0, 1, 0, ALWAYS_UP), Candidate(1, 1, 0, ALWAYS_UP)
    rng = random.Random(0)
    assert plan("mct*", [a, b], 2, 5, 1, rng) == [0, 1]
    assert plan("mct*", [a, b], 2, 5, 1, rng, self_counts=True) == [0, 0]
    assert plan("mct", [a, b], 2, 5, 1, rng, self_counts=False) == [0, 1]  # unstarred: no n_active


def test_random_heuristics_pick_in_proportion_to_their_weights() -> None:
    fast, slow = Candidate(0, 1, 0, STEADY), Candidate(1, 4, 0, STEADY)
    picks = plan("random1w", [fast, slow], 10_000, 1, 5, random.Random(5))
    assert picks.count(0) / len(picks) == pytest.approx(0.8, abs=0.02)  # weights 1/1 : 1/4
    picks = plan("random", [fast, slow], 10_000, 1, 5, random.Random(5))
    assert picks.count(0) / len(picks) == pytest.approx(0.5, abs=0.02)


def test_heuristic_names_from_a_command_line() -> None:
    assert canonical("EMCT*") == canonical("emct-star") == canonical("emcts") == "emct*"
    assert canonical("random2W") == "random2w"
    assert len(NAMES) == 17
    with pytest.raises(ValueError, match="choose one of"):
        canonical("fastest")


def test_the_simulator_follows_a_hand_computed_timeline() -> None:
    # One worker, always UP, 3 slots per task; program 5 slots, data 1 slot, one channel.
    # Slots 0-4 the program; 5 task 0's data; 6-8 task 0 (task 1's data in slot 6);
    # 9-11 task 1: the first iteration ends after slot 11. The second: data in 12, tasks in
    # 13-15 and 16-18 (task 1's data overlapped in 13).
    platform = Platform((ALWAYS_UP,), (3,))
    for iterations, makespan in ((1, 12), (2, 19)):
        params = Params(p=1, m=2, n_com=1, w_min=1, iterations=iterations)
        traces = Traces(platform, 1, "up")
        assert simulate(params, platform, traces, "mct").makespan == makespan


def test_a_down_worker_loses_its_program_and_its_tasks_go_elsewhere() -> None:
    # Worker 0 goes DOWN for good at slot 3 (while receiving the program): worker 1 does
    # everything, after its own program.
    platform = Platform((ALWAYS_UP, ALWAYS_UP), (2, 2))
    params = Params(p=2, m=2, n_com=2, w_min=1, iterations=1, replicas=0)
    traces = Traces(platform, 1, "up")
    traces.states[0] = [UP, UP, UP] + [DOWN] * 100
    traces.states[1] = [RECLAIMED] * 10 + [UP] * 100
    out = simulate(params, platform, traces, "mct")
    # Worker 1: program in slots 10-14, task data 15, computing 16-17 while the next data
    # comes in 16, the second task 18-19.
    assert out.makespan == 20


def test_the_study_is_deterministic_per_seed_and_emct_beats_random() -> None:
    todo = [
        Instance(Params(m=m, n_com=5, w_min=2), 11 + m, 1000 + trial)
        for m in (5, 10)
        for trial in range(2)
    ]
    first = [run_instance(i) for i in todo]
    assert first == [run_instance(i) for i in todo]
    table = summarize(first)
    assert table.instances == 4 and set(table.dfb) == set(NAMES)
    assert table.dfb["emct"] < table.dfb["random"]


def test_the_study_on_two_processes_gives_what_one_gives_with_intervals() -> None:
    # Instances travel to the processes pickled: a compiled Params must survive that (it
    # did not, once, when platform.py was compiled with mypyc).
    grid: dict[str, list[int]] = {"tasks": [5], "n_com": [5], "w_min": [1, 3]}
    one = run_study(1, 2, jobs=1, **grid)  # type: ignore[arg-type]
    two = run_study(1, 2, jobs=2, **grid)  # type: ignore[arg-type]
    assert one == two and one.instances == 4
    assert all(ci >= 0 for ci in one.ci95.values())
    # Each starred heuristic's gain over its plain one, paired per scenario.
    assert set(one.star_gain) == {"emct", "mct", "ud", "lw"}


def test_replicas_are_a_parameter_of_the_study() -> None:
    # Issue 34, point 4: how many extra copies idle workers get sets the scale of every
    # heuristic's degradation (docs/benchmarks.md): `--replicas` chooses it.
    rng = random.Random(5)
    params = Params(m=5, n_com=5, w_min=2, iterations=2)
    platform = Platform.draw(params, rng)
    made = {}
    for extra in (0, 1, 2):
        traces = Traces(platform, 7, "up")
        made[extra] = simulate(replace(params, replicas=extra), platform, traces, "random")
    assert made[0].replicas == 0 and made[1].replicas > 0
    assert made[2].replicas >= made[1].replicas
    with pytest.raises(SystemExit) as exited:
        main(["--replicas", "-1"])
    assert exited.value.code == 2
