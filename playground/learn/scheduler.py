"""Watch it learn's trainer: many learners' runs at once, on one worker thread.

Runs whose models have the same shape (vocabulary, size, positions) form a group, and a group
steps its runs of a turn as one batched computation (:func:`playground.learn.batched.batched_step`),
the batches on two threads (the server's two cores). Each run keeps its own settings, seed,
curve and samples, and stops at its number of steps, at its seconds cap, on ``stop`` (Stop, or the
learner leaving) or when its loss becomes infinite. At most :data:`MAX_RUNNING` runs hold a place
at once and share the steps: a turn steps the :data:`STEP_RUNS` that have been given the least
training time (:func:`turn`; a run's share of each batched step it took part in), a new run first
and then from the least any running run has (as the decoding loop's turns start a newcomer), so a
run arriving while others train takes its first step within a turn or two, however many train.
Past the places, runs wait in line, told their place; one run per visitor at a time. While runs
wait, a run past its fair share (:data:`FAIR_STEPS` steps or :data:`FAIR_SECONDS` of training)
ends, the longest first, one per waiting run (:func:`runs_to_cut`): the first in line starts
within about :data:`FAIR_SECONDS`, whatever the runs ahead asked for.

Same seed and settings, same curve: a run's batches and samples come from (seed, step), and the
stacked step gives each model what it gives alone (docs/training.md states the tolerance
measured beside others)."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import torch

from model.evaluate import evaluate_loss
from model.train import adamw

from .batched import Learner, batched_step, shape_key
from .corpus import Corpus, load_corpus
from .refs import references
from .run import SAMPLE_EVERY, VAL_WINDOWS, LearnSettings, RunState, build_model, sample, seconds_text, train_config
from ..limits import FAIR_SECONDS, FAIR_STEPS, MAX_LINE, MAX_RUNNING, STEP_RUNS
from ..validation import InputError

__all__ = ["MAX_RUNNING", "MAX_LINE", "STEP_RUNS", "FAIR_STEPS", "FAIR_SECONDS", "OTHERS_WAITING", "runs_to_cut", "turn",
           "Trainer", "TRAINER"]

OTHERS_WAITING = "others waiting"  # the stop_reason of a run ended at its share to give others a turn
WORKERS = min(2, os.cpu_count() or 1)  # threads stepping runs side by side, one core each
STOP_WAIT_S = 5.0  # the most a closed run waits for the worker to let it go (one batched step)


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


ONE_RUN_PER_VISITOR = "one run per learner at a time"  # the refusal's words (benchmarks count it as busy)


def runs_to_cut(runs: list[tuple[int, float]], waiting: int, free: int, fair_steps: int = FAIR_STEPS,
                fair_s: float = FAIR_SECONDS) -> list[int]:
    """Which training runs ``(steps done, seconds trained)`` end now so that ``waiting`` runs in
    line get their turn, given ``free`` places (places free, or being freed): those past their
    share (``fair_steps`` steps or ``fair_s`` seconds), the most steps first, one per waiting
    run that no free place takes. Indices into ``runs``."""
    need = waiting - free
    if need <= 0:
        return []
    over = [i for i, (step, seconds) in enumerate(runs) if step >= fair_steps or seconds >= fair_s]
    return sorted(over, key=lambda i: (-runs[i][0], -runs[i][1]))[:need]


def turn(runs: list[tuple[bool, float, int]], k: int = STEP_RUNS) -> list[int]:
    """Which runs ``(stepped yet, seconds of training given, arrival)`` step this turn: at most
    ``k``, those not stepped yet first, then the least given, arrival order among equals. Indices
    into ``runs``, in that order."""
    return sorted(range(len(runs)), key=lambda i: runs[i])[:k]


@dataclass
class _Run:
    """A run and what the worker keeps of it."""

    state: RunState
    kind: str
    stop: threading.Event
    learner: Learner | None = None
    corpus: Corpus | None = None
    key: tuple = ()
    t0: float = 0.0
    done: bool = False  # the worker has let it go
    cut: int = 0  # runs waiting when it was chosen to end at its share (0: not chosen)
    given_s: float = 0.0  # its share of the batched steps it took part in (turn), from its start's floor
    arrival: int = 0  # the trainer's count of runs when it came


class Trainer:
    """Many runs at once on one worker thread (started when a run arrives, gone when none is left)."""

    def __init__(self, max_running: int = MAX_RUNNING, max_line: int = MAX_LINE, workers: int = WORKERS,
                 fair_steps: int = FAIR_STEPS, fair_s: float = FAIR_SECONDS, step_runs: int = STEP_RUNS) -> None:
        self.max_running, self.max_line, self.workers = max_running, max_line, workers
        self.fair_steps, self.fair_s = fair_steps, fair_s
        self.step_runs = step_runs
        self._cond = threading.Condition()
        self._running: list[_Run] = []
        self._line: list[_Run] = []
        self._worker: threading.Thread | None = None
        self._arrivals = 0
        self.turns = 0  # the worker's turns so far (for tests and monitoring)

    # --- the learner's side ------------------------------------------------------------------

    def run(self, s: LearnSettings, *, kind: str = "char", visitor: str | None = None, poll_s: float = 0.25) -> Iterator[RunState]:
        """Queue a run, then yield its state every ``poll_s`` (while it waits, its place in line);
        the last yield is the ended run. Closing the generator (Stop, the learner leaving) stops
        the run within one batched step. A visitor with a run still going is refused."""
        run = _Run(RunState(s, visitor=visitor, kind=kind), kind, threading.Event())
        with self._cond:
            run.arrival, self._arrivals = self._arrivals, self._arrivals + 1
            if visitor is not None:
                mine = next((r for r in self._running + self._line if r.state.visitor == visitor and not r.done), None)
                if mine is not None:
                    raise InputError(
                        f"you already have a run {'in line' if mine in self._line else 'training'} (step "
                        f"{mine.state.step:,} of {mine.state.settings.steps:,}): {ONE_RUN_PER_VISITOR}; "
                        "press Stop on it or wait for it to end"
                    )
            # A run that just ended frees its place before the worker's next turn admits the line:
            # Gradio starts the next handler as soon as the ended one returns, so count it free now.
            self._admit()
            if len(self._line) >= self.max_line:
                raise InputError(
                    f"{len(self._running)} runs are training and {len(self._line)} wait in line, the most this "
                    "server takes: try again in a minute"
                )
            self._line.append(run)
            self._admit()
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="learn", daemon=True)
                self._worker.start()
        try:
            while True:
                with self._cond:
                    if run.done:
                        break
                    self._cond.wait(timeout=poll_s)
                    if run.done:
                        break
                yield run.state
            if run.state.error is not None:
                raise run.state.error
            yield run.state
        finally:
            run.stop.set()
            with self._cond:
                if run in self._line:
                    self._line.remove(run)
                    run.done = True
                    self._stopped(run)
                    self._admit()
                deadline = time.perf_counter() + STOP_WAIT_S
                while not run.done and time.perf_counter() < deadline:
                    self._cond.wait(timeout=0.05)

    def counts(self) -> tuple[int, int]:
        """(runs training, runs waiting)."""
        with self._cond:
            return sum(not r.done for r in self._running), len(self._line)

    # --- the worker's side (the lock held where it says so) ----------------------------------

    def _admit(self) -> None:
        """Lock held: move runs from the line into training while there is room; tell the others
        their place."""
        while self._line and sum(not r.done for r in self._running) < self.max_running:
            run = self._line.pop(0)
            run.state.position, run.state.status, run.state.message = 0, "preparing", "Preparing the training text..."
            # its share of the steps counts from the least any training run has been given: no
            # credit for the time it waited, which would let it hold every turn until it caught up
            run.given_s = min((r.given_s for r in self._running if not r.done), default=0.0)
            self._running.append(run)
        for place, run in enumerate(self._line, start=1):
            run.state.position, run.state.message = place, self._waiting_message(place)
        self._cond.notify_all()

    def _waiting_message(self, place: int) -> str:
        # While anyone waits, a run ends at its share: that, not what it asked for, is its end.
        left = [max(0, min(r.state.settings.steps, self.fair_steps) - r.state.step) for r in self._running if not r.done]
        soonest = f" (the nearest to its end has about {min(left):,} steps left)" if left else ""
        ahead = "one run" if place == 1 else f"{place} runs"
        return (
            f"{len(left)} learners' models are training, the most this server trains at once. "
            f"You are {_ordinal(place)} in line, {ahead} ahead of you{soonest}. While learners wait, each run trains "
            f"for at most {self.fair_steps:,} steps or {self.fair_s:g} s, so the line moves. Yours starts by itself; "
            "keep this page open."
        )

    def _cut_for_the_line(self) -> None:
        """Lock held: mark the runs that end at their share so that those in line get a turn."""
        if not self._line:
            return
        training = [r for r in self._running if not r.done and not r.cut and r.learner is not None]
        freeing = self.max_running - sum(not r.done for r in self._running) + sum(1 for r in self._running if r.cut and not r.done)
        shares = [(r.state.step, r.state.elapsed_s) for r in training]
        for i in runs_to_cut(shares, len(self._line), freeing, self.fair_steps, self.fair_s):
            training[i].cut = len(self._line)

    def _work(self) -> None:
        """The worker: each turn, the :func:`turn` of the training runs takes one step. Runs of one
        shape step as one batched computation; the batches (a large group split in two) go to
        :data:`WORKERS` threads of one PyTorch thread each, one core each without OpenMP's
        barriers (which cost seconds a step on a shared, oversubscribed machine)."""
        torch.set_num_threads(1)  # per thread: the threads serving the other tabs keep theirs
        with ThreadPoolExecutor(self.workers, thread_name_prefix="learn-step", initializer=torch.set_num_threads, initargs=(1,)) as pool:
            while True:
                with self._cond:
                    for run in [r for r in self._running if r.done]:
                        self._running.remove(run)
                    self._admit()
                    if not self._running:
                        self._worker = None
                        return
                    self._cut_for_the_line()
                    runs = list(self._running)
                new = [run for run in runs if run.learner is None and not run.done]
                for future in [pool.submit(self._guarded, self._prepare, run) for run in new]:
                    future.result()  # new runs start together (their models and step-0 samples side by side)
                ready = [run for run in runs if not run.done and run.learner is not None and not self._check_end(run)]
                groups: dict[tuple, list[_Run]] = {}
                for i in turn([(r.learner.step > 0, r.given_s, r.arrival) for r in ready], self.step_runs):
                    groups.setdefault(ready[i].key, []).append(ready[i])
                for future in [pool.submit(self._step, batch) for batch in _batches(list(groups.values()), self.workers)]:
                    future.result()
                self.turns += 1

    def _guarded(self, fn, run: _Run) -> None:
        try:
            fn(run)
        except Exception as err:  # noqa: BLE001 -- the learner's stream raises it
            run.state.error, run.state.status = err, "failed"
            self._let_go(run)

    def _prepare(self, run: _Run) -> None:
        s, state = run.state.settings, run.state
        corpus = load_corpus(run.kind, progress=lambda message: setattr(state, "message", message))
        state.refs, state.vocab_size = references(corpus), corpus.vocab_size
        model = build_model(s, corpus.vocab_size)
        model.train()
        tc = train_config(s)
        opt = adamw(model, tc)
        run.learner, run.corpus = Learner(model, opt, tc), corpus
        run.key = (run.kind, shape_key(model))
        state.status, state.message = "training", "Training..."
        run.t0 = time.perf_counter()

    @staticmethod
    def _first_sample(run: _Run) -> None:
        """The untrained model's sample: the same weights built again from the seed."""
        s = run.state.settings
        run.state.samples.insert(0, [0, sample(build_model(s, run.corpus.vocab_size), run.corpus, s.seed, 0)])

    def _step(self, group: list[_Run]) -> None:
        t0 = time.perf_counter()
        try:
            losses = batched_step([run.learner for run in group], group[0].corpus.train)
        except Exception as err:  # noqa: BLE001
            for run in group:
                run.state.error, run.state.status = err, "failed"
                self._let_go(run)
            return
        share = (time.perf_counter() - t0) / len(group)  # (and each run's own samples, below)
        for run, loss in zip(group, losses):
            t1 = time.perf_counter()
            state, step = run.state, run.learner.step
            state.losses.append([step - 1, loss])
            state.step, state.tokens = step, step * run.learner.tc.batch_size * run.learner.model.config.block_size
            state.elapsed_s = time.perf_counter() - run.t0
            state.tokens_per_s = state.tokens / max(state.elapsed_s, 1e-9)
            if step == 1:  # step 0's sample, after the first step so that a run starts at once
                self._guarded(self._first_sample, run)
            if not math.isfinite(loss):
                state.stop_reason = "diverged"
            elif step % SAMPLE_EVERY == 0 and not run.done:
                self._guarded(lambda r: r.state.samples.append([step, sample(r.learner.model, r.corpus, r.state.settings.seed, step)]), run)
            self._check_end(run)
            run.given_s += share + time.perf_counter() - t1

    def _check_end(self, run: _Run) -> bool:
        """Whether the run has ended (and if so, ends it)."""
        if run.done:
            return True
        state = run.state
        state.elapsed_s = time.perf_counter() - run.t0
        if run.stop.is_set():
            state.stop_reason = "stopped"
        elif not state.stop_reason:
            if state.step >= state.settings.steps:
                state.stop_reason = "steps"
            elif state.elapsed_s >= state.settings.seconds:
                state.stop_reason = "time budget"
            elif run.cut:
                state.stop_reason = OTHERS_WAITING
        if not state.stop_reason:
            return False
        self._guarded(self._finish, run)
        return True

    def _finish(self, run: _Run) -> None:
        state, model = run.state, run.learner.model
        if state.stop_reason != "stopped":  # Stop frees the CPU at once: no last sample, no evaluation
            if not state.samples:
                self._first_sample(run)
            if state.samples[-1][0] != state.step:
                state.samples.append([state.step, sample(model, run.corpus, state.settings.seed, state.step)])
            state.val_loss = evaluate_loss(model, run.corpus.val, VAL_WINDOWS)
        state.elapsed_s = time.perf_counter() - run.t0
        model.eval()
        state.model = model  # the learner can try it (continue_text) once the run has ended
        state.status = "stopped" if state.stop_reason == "stopped" else "finished"
        state.message = _ended_message(state)
        if state.stop_reason == OTHERS_WAITING:
            waiting = "one learner was" if run.cut == 1 else f"{run.cut} learners were"
            state.message = (
                f"Ended after {state.step:,} of {state.settings.steps:,} steps to give others a turn: {waiting} waiting "
                f"for a place, and while learners wait each run trains for at most {self.fair_steps:,} steps or "
                f"{self.fair_s:g} s. Your model is scored and ready to try; press Start to train again (you join the line)."
            )
        self._let_go(run)

    def _let_go(self, run: _Run) -> None:
        with self._cond:
            run.done = True
            run.learner = None  # its optimizer's moments go; the ended run keeps its model
            self._cond.notify_all()

    @staticmethod
    def _stopped(run: _Run) -> None:
        run.state.status, run.state.stop_reason = "stopped", "stopped"
        run.state.message = "Stopped before your turn came."


def _batches(groups: list[list[_Run]], workers: int) -> list[list[_Run]]:
    """The batched steps of a turn: one per group, the largest groups halved until there are
    ``workers`` of them (a group's runs give the same numbers in any batch)."""
    batches = [list(g) for g in groups if g]
    while 0 < len(batches) < workers:
        largest = max(batches, key=len)
        if len(largest) < 2:
            break
        batches.remove(largest)
        half = (len(largest) + 1) // 2
        batches += [largest[:half], largest[half:]]
    return batches


def _ended_message(state: RunState) -> str:
    if state.stop_reason == "stopped":
        return f"Stopped after {state.step:,} steps."
    if state.stop_reason == "diverged":
        return f"The loss became infinite at step {state.step:,}: the learning rate is far too high."
    if state.stop_reason == "time budget":
        return f"Stopped at the {state.settings.seconds} s cap after {state.step:,} of {state.settings.steps:,} steps (the server is busy)."
    return f"Finished: {state.step:,} steps in {seconds_text(state.elapsed_s)} s."


TRAINER = Trainer()  # the app's one trainer
