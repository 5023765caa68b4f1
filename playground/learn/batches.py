"""A run's batches, drawn alike on the server and in the browser (web/engine/learn.js): the rows of
step ``step`` start at whole numbers of the shared generator (runtime/draws.py), stream ``BATCHES``,
lane ``step``, key the run's seed.

The rule (docs/training.md, "The same run in both places"): with ``N`` training ids and windows of
``T``, row ``r`` of step ``step``'s batch starts at ``s_r = integers(seed, BATCHES, rows,
high=N - T, lane=step)[r]``, i.e. ``floor(u_r * (N - T))`` for the stream's uniform ``r``; its
inputs are ids ``s_r .. s_r + T - 1`` and its targets ``s_r + 1 .. s_r + T``. So a step's batch
is a pure function of (seed, step), whichever engine trains and in whatever order."""

from __future__ import annotations

import numpy as np
import torch

from runtime import draws

__all__ = ["batch_starts", "batch"]


def batch_starts(seed: int, step: int, n_ids: int, block_size: int, rows: int) -> np.ndarray:
    """Where each of the ``rows`` windows of step ``step`` starts in a text of ``n_ids`` ids."""
    if n_ids <= block_size:
        raise ValueError(f"a text of {n_ids} ids has no window of {block_size} + 1")
    return draws.integers(seed, draws.BATCHES, rows, n_ids - block_size, lane=step)


def batch(data: np.ndarray, seed: int, step: int, block_size: int, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, next-id targets) of step ``step``, int64 [rows, block_size]."""
    starts = batch_starts(seed, step, len(data), block_size, rows)
    at = starts[:, None] + np.arange(block_size + 1)  # [rows, T + 1]
    windows = data[at].astype(np.int64)
    return torch.from_numpy(windows[:, :-1].copy()), torch.from_numpy(windows[:, 1:].copy())
