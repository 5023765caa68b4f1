"""Cosine similarity (playground/similarity.py), shared by the embeddings and positional tabs,
against its definition a·b / (|a| |b|)."""

from __future__ import annotations

import numpy as np
import pytest

from playground.similarity import cosine, cosine_matrix, unit_rows


def test_cosine_by_definition():
    a, b = np.array([1.0, 2.0, 2.0]), np.array([2.0, 0.0, 1.0])
    assert cosine(a, b) == pytest.approx((2 + 0 + 2) / (3 * np.sqrt(5)))
    assert cosine(a, 7 * a) == pytest.approx(1.0) and cosine(a, -a) == pytest.approx(-1.0)
    assert cosine(np.array([1.0, 0.0]), np.array([0.0, 3.0])) == 0.0
    assert cosine(a, np.zeros(3)) == 0.0  # a zero vector is like nothing, not NaN


def test_cosine_matrix_is_every_pair():
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(5, 8)).astype(np.float32)
    m = cosine_matrix(rows)
    expected = [[cosine(u, v) for v in rows] for u in rows]
    np.testing.assert_allclose(m, expected, atol=1e-12)
    np.testing.assert_allclose(np.diag(m), 1.0, atol=1e-12)


def test_unit_rows():
    x = np.array([[3.0, 4.0], [0.0, 0.0]])
    np.testing.assert_allclose(unit_rows(x), [[0.6, 0.8], [0.0, 0.0]])
    np.testing.assert_allclose(unit_rows(np.array([0.0, 2.0])), [0.0, 1.0])
