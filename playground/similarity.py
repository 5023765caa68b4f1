"""Cosine similarity, which the embeddings and positional-encoding tabs both measure:
cos(a, b) = a·b / (|a| |b|) (the Transformer tutorial's ``cosine_similarity``). A zero vector is like nothing: 0."""

from __future__ import annotations

import numpy as np

__all__ = ["unit_rows", "cosine", "cosine_matrix"]

_TINY = 1e-12  # below this length a vector counts as zero (no division by zero)


def unit_rows(x: np.ndarray) -> np.ndarray:
    """``x`` ([..., d]) with each vector divided by its length; a zero vector stays zero."""
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), _TINY)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """cos(a, b) of two vectors."""
    return float(unit_rows(np.asarray(a, dtype=np.float64)) @ unit_rows(np.asarray(b, dtype=np.float64)))


def cosine_matrix(rows: np.ndarray) -> np.ndarray:
    """cos(rows[p], rows[q]) for every pair of rows of ``rows`` [n, d]: an [n, n] matrix."""
    unit = unit_rows(np.asarray(rows, dtype=np.float64))
    return unit @ unit.T
