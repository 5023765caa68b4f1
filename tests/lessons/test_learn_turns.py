"""Watch it learn's steps shared between runs (playground/learn/scheduler.py): a turn steps the
runs given the least training time, a new run first, so a learner arriving while 16 runs train
takes a first step within a turn or two instead of waiting for one to end; as a pure function at
its edges, and on a trainer of 16 runs."""

from __future__ import annotations

import time

import pytest

from conftest import wait_for
from playground.learn import run as learn_run
from playground.learn.scheduler import STEP_RUNS, Trainer, turn
from playground.limits import MAX_RUNNING


def test_a_turn_takes_new_runs_first_then_the_least_given_and_at_most_k():
    runs = [(True, 4.0, 0), (True, 1.0, 1), (False, 9.0, 5), (True, 1.0, 2), (True, 2.5, 3)]
    assert turn(runs, 3) == [2, 1, 3]  # never stepped; then 1.0 and 1.0 in arrival order
    assert turn(runs, 5) == [2, 1, 3, 4, 0]
    assert turn(runs[:2], 2) == [1, 0] and turn(runs[:2], 1) == [1]  # exactly k: all; one fewer: the most given waits
    assert turn([], 8) == []


def test_the_defaults_let_a_class_train_together_a_turn_at_a_time():
    assert MAX_RUNNING > 16 and 1 <= STEP_RUNS < MAX_RUNNING


# The longest a training run's curve may stand still while the others catch up with its share of
# time (a first step with its sample costs several plain steps): tens of turns on a busy machine.
NEXT_STEP_S = 60.0


def _arrive_beside(trainer: Trainer, others: int) -> tuple[float, int, int]:
    """``others`` long runs training on ``trainer`` (each stepped once), then a learner's run: the
    seconds to its first point, the steps the others took meanwhile, and the turns then until every
    long run had stepped again (none left behind by the newcomer, nor by the runs that came first)."""
    long = [trainer.run(learn_run.settings(300, 40 + i, steps=5000), visitor=f"10.0.2.{i}", poll_s=0.05) for i in range(others)]
    newcomer = None
    try:
        for runs in long:
            next(runs)
        assert trainer.counts() == (others, 0)
        states = lambda: [r.state for r in list(trainer._running) if r.state.visitor != "learner"]  # noqa: E731
        wait_for(lambda: all(s.step >= 1 for s in states()), 600, 0.05, message="every run's first step")
        before = sum(s.step for s in states())
        t0 = time.perf_counter()
        newcomer = trainer.run(learn_run.settings(15, 7, steps=5000), visitor="learner", poll_s=0.05)
        state = next(newcomer)
        assert state.status in ("preparing", "training") and state.position == 0, state.message  # no line
        wait_for(lambda: state.losses, 120, 0.01, message="the newcomer's first point")
        first_s = time.perf_counter() - t0
        meanwhile = sum(s.step for s in states()) - before
        # Turns are fair in time, not in steps (a run's first step carries its untrained sample, and
        # the runs that came first have had more steps): what a learner sees is that no curve stops.
        at, turns0 = [s.step for s in states()], trainer.turns
        wait_for(lambda: all(s.step > a for s, a in zip(states(), at)), NEXT_STEP_S, 0.05,
                 message=f"every long run's next step within {NEXT_STEP_S:g} s (none starves)")
        return first_s, meanwhile, trainer.turns - turns0
    finally:
        for runs in [*long, *([newcomer] if newcomer else [])]:
            runs.close()
        wait_for(lambda: trainer.counts() == (0, 0), 30, message="every run let go")


def test_a_learner_arriving_while_others_train_steps_within_two_turns_and_nobody_starves(data_dir):
    """Four long runs, turns of two: the newcomer takes its first step in the turn under way when
    it came or the next (at most two turns of the others' steps meanwhile), not once a run ends."""
    first_s, meanwhile, turns = _arrive_beside(Trainer(max_running=8, step_runs=2), 4)
    print(f"\nthe newcomer's first point {first_s:.2f} s after it came, {meanwhile} steps of the others meanwhile, "
          f"every run stepped again within {turns} turns")
    assert meanwhile <= 2 * 2, meanwhile


@pytest.mark.slow
def test_a_learner_arriving_while_16_runs_train_gets_a_first_point_within_a_few_seconds(data_dir):
    """The default trainer, 16 long runs: the newcomer trains at once (no line), its first point
    within two turns of the others' steps and a few seconds."""
    first_s, meanwhile, turns = _arrive_beside(Trainer(), 16)
    print(f"\nthe newcomer's first point {first_s:.2f} s after it came, {meanwhile} steps of the 16 meanwhile, "
          f"every run stepped again within {turns} turns")
    assert meanwhile <= 2 * STEP_RUNS, meanwhile
