"""The Watch it learn run on the command line (the same trainer as the tab):

    python -m playground.learn --vocab gpt2 --steps 500
"""

from __future__ import annotations

import argparse
import threading
import time

from .corpus import VOCABS
from .run import DEFAULT_STEPS, INITS, LEARNING_RATES, MAX_SECONDS, POSITIONS, SIZES, settings
from .scheduler import Trainer

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Train a small GPT from scratch for a number of steps (the Watch it learn tab).")
    ap.add_argument("--vocab", choices=VOCABS, default="char")
    ap.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    ap.add_argument("--seconds", type=int, default=MAX_SECONDS, help="a cap on the run's time")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init", choices=INITS, default="proper")
    ap.add_argument("--learning-rate", choices=list(LEARNING_RATES), default="good")
    ap.add_argument("--size", choices=list(SIZES), default="tiny")
    ap.add_argument("--positions", choices=POSITIONS, default="learned")
    ap.add_argument("--learners", type=int, default=0, metavar="N",
                    help="a class: one run alone, then N runs started at once (seeds 0..N-1); when each started, when each ended")
    args = ap.parse_args(argv)
    if args.learners:
        return class_of(args.learners, settings(args.seconds, 0, args.init, args.learning_rate, args.size, args.positions, args.steps))
    s = settings(args.seconds, args.seed, args.init, args.learning_rate, args.size, args.positions, args.steps)
    state = None
    for state in Trainer().run(s, kind=args.vocab, poll_s=1.0):
        pass
    r = state.refs
    unit = "character" if state.kind == "char" else "token"
    print(f"vocabulary: {state.kind}, V = {state.vocab_size:,}, ln V = {r.ln_v:.3f}")
    print(f"references (nats/{unit}): unigram {r.unigram:.3f}, bigram {r.bigram:.3f}, shipped model {r.shipped:.3f}")
    print(
        f"{state.step} steps in {state.elapsed_s:.1f} s ({state.stop_reason}), {state.tokens:,} tokens, "
        f"{state.tokens_per_s:,.0f} tokens/s; loss at step 0 {state.losses[0][1]:.3f}, last 20 steps "
        f"{state.recent_loss():.3f}, held-out {state.val_loss:.3f}"
    )
    print(f"sample at step {state.samples[-1][0]}:\n{state.samples[-1][1]}")


def _timed(trainer: Trainer, s, visitor: str, out: dict) -> None:
    """One learner: seconds from Start to its first step shown, and to its end."""
    t0 = time.perf_counter()
    started = None
    for state in trainer.run(s, visitor=visitor, poll_s=0.05):
        if started is None and state.step >= 1:
            started = time.perf_counter() - t0
    out[visitor] = (started, time.perf_counter() - t0, state)


def class_of(n: int, s) -> None:
    """A class pressing Start at once: one run alone first, then ``n`` at once on one trainer;
    each learner's wait for its first step, its time to the end, and its curve against its seed's
    curve alone (the run alone of seed 0, and seed i alone for the first few)."""
    from dataclasses import replace

    alone: dict = {}
    _timed(Trainer(), s, "alone", alone)
    first_s, alone_s, solo = alone["alone"]
    print(f"one run alone ({s.steps} steps): first step after {first_s:.2f} s, ended after {alone_s:.1f} s")
    trainer, out = Trainer(), {}
    threads = [threading.Thread(target=_timed, args=(trainer, replace(s, seed=i), f"learner {i}", out)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    starts = sorted(v[0] if v[0] is not None else float("inf") for v in out.values())
    ends = [v[1] for v in out.values()]
    steps = [v[2].step for v in out.values()]
    print(f"{n} at once: first steps after {starts[0]:.2f}-{starts[-1]:.2f} s ({sum(x <= 2 for x in starts)} within 2 s), "
          f"ended after {min(ends):.1f}-{max(ends):.1f} s ({max(ends) / alone_s:.2f}x one alone), steps {min(steps)}-{max(steps)}")
    same = out["learner 0"][2]
    diff = max(abs(a[1] - b[1]) for a, b in zip(same.losses, solo.losses))
    print(f"seed 0 beside {n - 1} others against alone: largest loss difference {diff:.3g} over {len(same.losses)} steps")


if __name__ == "__main__":
    main()
