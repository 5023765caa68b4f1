"""Choosing the next token from logits: greedy, temperature, top-k, top-p (numpy, per call RNG)."""

from __future__ import annotations

import math

import numpy as np


def check_controls(
    max_new_tokens: int, temperature: float, top_k: int | None, top_p: float | None, num_samples: int, vocab_size: int
) -> None:
    """Raise ValueError with a plain message for any control outside its range."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive integer, not {max_new_tokens!r}")
    if not isinstance(temperature, (int, float)) or not math.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a number >= 0 (0 = greedy), not {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or not 1 <= top_k):
        raise ValueError(f"top_k must be a positive integer or None, not {top_k!r}")
    if top_p is not None and (not isinstance(top_p, (int, float)) or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be in (0, 1] or None, not {top_p!r}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)) or not 1 <= num_samples <= 64:
        raise ValueError(f"num_samples must be an integer from 1 to 64, not {num_samples!r}")


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax in float64 (probabilities shown to users should sum to 1)."""
    z = logits.astype(np.float64)
    z -= z.max(axis=-1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=-1, keepdims=True)
    return z


def sampling_distribution(logits: np.ndarray, temperature: float, top_k: int | None, top_p: float | None) -> np.ndarray:
    """The distribution a token is drawn from, [B, V]: softmax(logits / T), then top-k, then top-p.

    top-k keeps the k most likely tokens (ties at the k-th value all stay); top-p keeps the
    smallest set of most likely tokens whose probabilities add up to at least p. Both renormalise.
    """
    if temperature == 0:  # the limit T -> 0: all mass on the argmax
        probs = np.zeros(logits.shape, dtype=np.float64)
        probs[np.arange(len(logits)), logits.argmax(axis=-1)] = 1.0
        return probs
    # Shift each row so its largest logit is 0 BEFORE dividing: softmax does not change, and a tiny
    # temperature (1e-308, 5e-324) sends the others to -inf instead of overflowing every logit to
    # +-inf (inf - inf = nan): the distribution tends to the argmax, the exact T -> 0 limit.
    z = logits.astype(np.float64)
    z -= z.max(axis=-1, keepdims=True)
    with np.errstate(over="ignore"):
        z /= temperature
    if top_k is not None and top_k < z.shape[-1]:
        kth = np.partition(z, -top_k, axis=-1)[:, -top_k][:, None]
        z[z < kth] = -np.inf
    probs = softmax(z)
    if top_p is not None and top_p < 1:
        order = np.argsort(-probs, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(probs, order, axis=-1)
        # Keep a token if the mass of the tokens before it is still below p: the smallest set >= p.
        keep_sorted = (np.cumsum(sorted_p, axis=-1) - sorted_p) < top_p
        keep = np.zeros_like(keep_sorted)
        np.put_along_axis(keep, order, keep_sorted, axis=-1)
        probs = np.where(keep, probs, 0.0)
        probs /= probs.sum(axis=-1, keepdims=True)
    return probs


def choose(
    logits: np.ndarray, temperature: float, top_k: int | None, top_p: float | None, rng: np.random.Generator
) -> np.ndarray:
    """Next token id per row of ``logits`` [B, V] -> [B] int64."""
    if temperature == 0:
        return logits.argmax(axis=-1).astype(np.int64)
    probs = sampling_distribution(logits, temperature, top_k, top_p)
    cdf = np.cumsum(probs, axis=-1)
    # Scaled to the row's total, so rounding never lets u fall past the last token; the first
    # index with cdf > u always has positive probability.
    u = rng.random((len(probs), 1)) * cdf[:, -1:]
    return (cdf <= u).sum(axis=-1).astype(np.int64)
