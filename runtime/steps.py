"""What a generation yields, one step per new position: the decoding loop's :class:`DecodeStep`,
and the :class:`Step` a reader gets (``runtime.generate.stream``, ``Scheduler.stream``).

:class:`Step`'s fields (lists are indexed by sample):

- ``index``: 0 for the first new token, 1 for the next, ...
- ``token_ids``: ``list[int | None]``, the new token per sample (None once that sample finished)
- ``token_probs``: ``list[float | None]``, the model's probability (softmax at temperature 1) of it
  (None throughout with ``n_candidates=None``)
- ``token_sample_probs``: ``list[float | None]``, its probability in the distribution it was drawn
  from (after temperature, top-k, top-p; 1.0 when greedy), whether or not it is among the
  candidates (None as ``token_probs``)
- ``candidates``: ``list[list[Candidate]]``, the ``n_candidates`` most likely tokens, each
  ``Candidate(token_id, prob, sample_prob)``: ``prob`` from the model at temperature 1,
  ``sample_prob`` from the distribution actually sampled (after temperature, top-k, top-p;
  greedy puts 1.0 on the argmax). Empty for a finished sample.
- ``finished``: ``list[bool]``, True from the step where the sample stopped (EOT or max_new_tokens)
- ``ttft_s``: seconds from the call to the first new token (prompt processing included)
- ``elapsed_s``: seconds since the call; ``tokens_per_s``: new positions per second so far,
  ``(index + 1) / elapsed_s``
- ``prompt_tokens_dropped``: how many leading prompt tokens were cut to fit the context
- ``notice``: a sentence for the user, or None: set on the first step when the prompt was cut, and
  on the step where the context filled up (from then on the oldest ``Engine.context_shift``
  tokens are dropped at once and the rest read anew)
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .sampling import Shown


class Candidate(NamedTuple):
    token_id: int
    prob: float  # the model's probability (softmax at temperature 1)
    sample_prob: float  # probability under the distribution actually sampled from


@dataclass(frozen=True)
class DecodeStep:
    """One new position of the decoding loop, before probabilities and timing are worked out."""

    tokens: np.ndarray  # [N] int64: the token chosen per row (EOT for a finished row)
    live: np.ndarray  # [N] bool: rows whose token counts (a finished row keeps running in the batch)
    finished: np.ndarray  # [N] bool: rows done after this step
    logits: np.ndarray  # [N, V]: what the token was chosen from
    notice: str | None
    t0: float  # perf_counter() at the call
    kept: list | None = None  # per row, the (ids, probabilities) it was drawn from (None: greedy)
    shown: list[Shown | None] | None = None  # per row, its top candidates (sampling.top_candidates) or None


@dataclass(frozen=True)
class Step:
    """One new position of a generation; see the module docstring for each field."""

    index: int
    token_ids: list[int | None]
    token_probs: list[float | None]
    candidates: list[list[Candidate]]
    finished: list[bool]
    ttft_s: float
    elapsed_s: float
    tokens_per_s: float
    prompt_tokens_dropped: int
    notice: str | None
    token_sample_probs: list[float | None]


def to_steps(decoded: Generator[DecodeStep, None, None], dropped: int) -> Iterator[Step]:
    """The loop's steps as :class:`Step` objects, with probabilities and timing. Closing this
    iterator closes ``decoded``: a stream closed early cancels its request at once."""
    ttft = 0.0
    try:
        for index, step in enumerate(decoded):
            tokens, live = step.tokens, step.live
            elapsed = time.perf_counter() - step.t0
            ttft = ttft or elapsed
            token_ids: list[int | None] = [int(t) if ok else None for t, ok in zip(tokens, live)]
            token_probs: list[float | None] = [None] * len(tokens)
            token_sample_probs: list[float | None] = [None] * len(tokens)
            candidates: list[list[Candidate]] = [[] for _ in tokens]
            for r, shown in enumerate(step.shown or ()):
                if shown is None:
                    continue
                top, probs, sample, p_token, q_token = shown
                token_probs[r], token_sample_probs[r] = p_token, q_token
                candidates[r] = [Candidate(int(t), float(p), float(q)) for t, p, q in zip(top, probs, sample)]
            yield Step(index, token_ids, token_probs, candidates, step.finished.tolist(), ttft, elapsed,
                       (index + 1) / elapsed, dropped, step.notice, token_sample_probs)
    finally:
        decoded.close()
