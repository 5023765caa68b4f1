"""Watch it learn: a small GPT trained from random weights on the server's CPU, live; this module
is its command line. The tab's parts, one job each:

- ``learn_corpus``: Shakespeare's works as ids of a small vocabulary (characters by default);
- ``learn_refs``: the reference losses (ln V, unigram, bigram, the shipped model);
- ``learn_run``: a run's settings, its untrained model, its samples, its state;
- ``learn_batched``: one training step of many same-shaped models at once (model.train's step);
- ``learn_scheduler``: many learners' runs at once, grouped by shape, a line past the limit;
- ``learn_view``: the chart, the counters, the samples, the table of runs, the sentences.

    python -m playground.learn --vocab gpt2 --steps 600    # a run on the command line
"""

from __future__ import annotations

import argparse

from .learn_corpus import VOCABS
from .learn_run import DEFAULT_STEPS, INITS, LEARNING_RATES, MAX_SECONDS, POSITIONS, SIZES, settings
from .learn_scheduler import Trainer

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
    args = ap.parse_args(argv)
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


if __name__ == "__main__":
    main()
