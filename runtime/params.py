"""What a generation asks for, checked once, at the call: :class:`SamplingParams` and the prompt's ids.

    SamplingParams(50)                                          # 50 new tokens, greedy
    SamplingParams(50, temperature=0.8, top_k=40, top_p=0.95, seed=1, num_samples=2)

A value outside its range raises ValueError with a plain message when the object is made, so a
generation never fails on its first step for an argument it was given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .sampling import Settings

MAX_SAMPLES = 64  # samples of one request (each a row of the decoding batch)
MAX_SEED = 2**32 - 1  # the seeds runtime.draws tells apart (its key holds 32 bits of the seed)


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


@dataclass(frozen=True)
class SamplingParams:
    """How one generation draws its tokens (as vLLM's ``SamplingParams``).

    temperature 0 is greedy; ``top_k`` keeps the k most likely tokens; ``top_p`` the smallest
    most-likely set with mass >= p (None: no cut), as ``runtime.sampling.sample`` specifies; the
    same ``seed`` (0 to 2**32 - 1; None: one drawn at random) repeats a run, token i of sample s
    drawing with ``runtime.draws.uniform(seed, SAMPLING, 1, start=i, lane=s)``. A sample stops
    after emitting ``<|endoftext|>`` (with ``stop_at_eot``) or after ``max_new_tokens``; several
    samples decode as rows of one batch. ``n_candidates``: the most likely tokens a stream shows
    per step with their probabilities (None: neither candidates nor probabilities, which saves a
    softmax over the vocabulary per token and sample).
    """

    max_new_tokens: int
    temperature: float = 0.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None
    num_samples: int = 1
    stop_at_eot: bool = True
    n_candidates: int | None = 10

    def __post_init__(self) -> None:
        if not _is_int(self.max_new_tokens) or self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a positive integer, not {self.max_new_tokens!r}")
        t = self.temperature
        if not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
            raise ValueError(f"temperature must be a number >= 0 (0 = greedy), not {t!r}")
        if self.top_k is not None and (not _is_int(self.top_k) or self.top_k < 1):
            raise ValueError(f"top_k must be a positive integer or None, not {self.top_k!r}")
        if self.top_p is not None and (not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1] or None, not {self.top_p!r}")
        if self.seed is not None and (not _is_int(self.seed) or not 0 <= self.seed <= MAX_SEED):
            raise ValueError(f"seed must be an integer from 0 to {MAX_SEED} or None, not {self.seed!r}")
        if not _is_int(self.num_samples) or not 1 <= self.num_samples <= MAX_SAMPLES:
            raise ValueError(f"num_samples must be an integer from 1 to {MAX_SAMPLES}, not {self.num_samples!r}")
        if self.n_candidates is not None and (not _is_int(self.n_candidates) or self.n_candidates < 0):
            raise ValueError(f"n_candidates must be an integer >= 0 or None, not {self.n_candidates!r}")
        object.__setattr__(self, "temperature", float(t))  # (frozen: the one normalisation, once)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def settings(self) -> Settings:
        """What each of its rows draws with (:func:`runtime.sampling.choose_rows`)."""
        return Settings(self.temperature, self.top_k, self.top_p)


def check_prompt(prompt_ids: Sequence[int], vocab_size: int, eot_id: int) -> np.ndarray:
    """The prompt as int64 ids, or ValueError with a plain message."""
    if isinstance(prompt_ids, (str, bytes)):
        raise ValueError("prompt_ids must be token ids, not text: encode it first (model.get_tokenizer().encode)")
    try:
        ids = np.asarray(list(prompt_ids))
    except TypeError:
        raise ValueError(f"prompt_ids must be a sequence of token ids, not {type(prompt_ids).__name__}") from None
    if ids.size == 0:
        raise ValueError(f"prompt_ids is empty: give at least one token (e.g. {eot_id}, <|endoftext|>, to start from nothing)")
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError("prompt_ids must be a flat sequence of integer token ids")
    if ids.min() < 0 or ids.max() >= vocab_size:
        raise ValueError(f"token ids must be in [0, {vocab_size}), got {ids.min()}..{ids.max()}")
    return ids.astype(np.int64)
