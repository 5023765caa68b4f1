"""Held-out loss: which windows of the validation split an evaluation scores, and the score.

One windowing for every evaluation in the project (training's periodic ones, the shipped model's
acceptance test, the ONNX export's checks), so their numbers are comparable.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F

from .gpt import GPT


def window_rows(n_tokens: int, block_size: int, max_windows: int = 0) -> np.ndarray:
    """Which non-overlapping windows of ``block_size`` an evaluation scores: all of them, or
    ``max_windows`` spread evenly over the split, so that a sampled evaluation covers every
    held-out work and estimates the same loss as a full one (the first N windows would all
    come from the first work)."""
    n = (n_tokens - 1) // block_size
    if not max_windows or max_windows >= n:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, max_windows).round().astype(np.int64))


def val_windows(n_tokens: int, block_size: int, max_windows: int = 0) -> int:
    """How many windows an evaluation covers (0: all of them)."""
    return len(window_rows(n_tokens, block_size, max_windows))


def window_batches(data: np.ndarray, block_size: int, max_windows: int = 0, batch_size: int = 16):
    """Yield (inputs, next-token targets), int64 arrays [b, block_size], over :func:`window_rows`."""
    T = block_size
    rows = window_rows(len(data), T, max_windows)
    for i in range(0, len(rows), batch_size):
        chunk = rows[i : i + batch_size]
        x = np.stack([data[r * T : r * T + T] for r in chunk]).astype(np.int64)
        y = np.stack([data[r * T + 1 : r * T + T + 1] for r in chunk]).astype(np.int64)
        yield x, y


@torch.no_grad()
def evaluate_loss(model: GPT, data: np.ndarray, max_windows: int = 0, batch_size: int = 16, chunk_rows: int = 2) -> float:
    """Mean cross-entropy (nats/token, full vocabulary, float32) over :func:`window_rows`.

    The output head runs ``chunk_rows`` windows at a time on the batch's last hidden states, so
    at most ``chunk_rows * block_size`` rows of float32 logits exist at once (a batch's 16 x 256 x
    50,257 would be 823 MB)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for x, y in window_batches(data, model.config.block_size, max_windows, batch_size):
        hidden = model(torch.from_numpy(x).to(device), head=False).hidden  # [b, T, C]
        targets = torch.from_numpy(y).to(device)
        for i in range(0, len(hidden), chunk_rows):
            logits = model.lm_head(hidden[i : i + chunk_rows]).float()  # [chunk, T, V]
            total += F.cross_entropy(logits.flatten(0, 1), targets[i : i + chunk_rows].flatten(), reduction="sum").item()
        count += y.size
    model.train(was_training)
    return total / count
