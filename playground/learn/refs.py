"""Watch it learn's reference losses: what an even guess, the unigram and bigram models and the
shipped model score on the held-out plays, in the run's unit (nats per character or per token)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from model import WEIGHTS_DIR

from ..memo import Memo
from .corpus import VOCABS, Corpus

__all__ = ["References", "ngram_losses", "shipped_loss", "references"]


@dataclass(frozen=True)
class References:
    """Losses to read the curve against, in nats per character (per token for GPT-2 tokens)."""

    ln_v: float  # guessing every id evenly
    unigram: float  # each id's frequency in the training works, scored on the held-out works
    bigram: float  # the frequency of each id after the one before it, likewise
    shipped: float  # the shipped model's held-out loss, converted to this unit
    shipped_per_gpt2_token: float  # ... as its training log states it
    gpt2_tokens_per_char: float  # of the held-out works: the conversion for characters

    def lines(self) -> dict[str, float]:
        return {"ln V (even guess)": self.ln_v, "unigram": self.unigram, "bigram": self.bigram, "shipped model": self.shipped}


def ngram_losses(train: np.ndarray, val: np.ndarray, vocab_size: int) -> tuple[float, float]:
    """(unigram, bigram) cross-entropy in nats on ``val``'s next ids (every id but the first, as a
    language model is scored), with counts from ``train`` smoothed by adding one to every count
    (Laplace), so that a pair the training works never show still has a probability."""
    train, val = train.astype(np.int64), val.astype(np.int64)
    V = vocab_size
    counts = np.bincount(train, minlength=V) + 1.0
    unigram = float(-np.log(counts[val[1:]] / counts.sum()).mean())
    pairs, pair_counts = np.unique(train[:-1] * V + train[1:], return_counts=True)
    keys = val[:-1] * V + val[1:]
    at = np.minimum(np.searchsorted(pairs, keys), len(pairs) - 1)
    seen = np.where(pairs[at] == keys, pair_counts[at], 0)
    before = np.bincount(train[:-1], minlength=V)[val[:-1]]  # how often the previous id starts a pair
    bigram = float(-np.log((seen + 1.0) / (before + V)).mean())
    return unigram, bigram


_references: Memo[str, References] = Memo(size=len(VOCABS))  # one per vocabulary, kept for the process


def shipped_loss(weights_dir: Path = WEIGHTS_DIR) -> float:
    """The shipped model's held-out loss (nats per GPT-2 token): its training log's last entry."""
    return float(json.loads((weights_dir / "training_log.json").read_text())[-1]["val_loss"])


def references(corpus: Corpus) -> References:
    """The reference losses for ``corpus``'s vocabulary (computed once; a second or two)."""
    return _references.get(corpus.kind, lambda kind: _compute(corpus))


def _compute(corpus: Corpus) -> References:
    unigram, bigram = ngram_losses(corpus.train, corpus.val, corpus.vocab_size)
    per_token = shipped_loss()
    tokens_per_char = corpus.val_gpt2_tokens / corpus.val_chars
    # Nats per token x tokens per character = nats per character, on the same held-out works.
    shipped = per_token * tokens_per_char if corpus.kind == "char" else per_token
    return References(math.log(corpus.vocab_size), unigram, bigram, shipped, per_token, tokens_per_char)
