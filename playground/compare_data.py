"""Compare's data objects in Python: the three comparisons of :mod:`playground.compare` in the shape
the static edition computes in the browser (web/static/tabs/compare.js), so that one view
(web/views/compare.js) draws either edition's numbers. Their fields: docs/browser.md ("Model and
Compare in the browser"). Each object holds the numbers only; the view derives what it says of
them (the shared probability axis, the losses against ln V, how sharp each head's rows are).
"""

from __future__ import annotations

import math
from typing import Any

from . import compare as cmp
from .attention import AttentionResult
from .embeddings import ArithmeticResult

__all__ = ["next_data", "neighbours_data", "attention_data", "compare_data"]


def next_data(prompt: str, results: list[cmp.NextToken], vocab_size: int) -> dict[str, Any]:
    """Both sides' next tokens after ``prompt`` (:func:`compare.compare_next_token`): the top
    candidates (raw token text, probability at temperature 1), the loss on the prompt (None for
    one token) and the next-token distribution's entropy, in nats; ``vocab_size``: the shown
    model's (the uniform guess's loss is its logarithm)."""
    vocab = vocab_size
    return {
        "prompt": prompt,
        "ids": list(results[0].ids),
        "vocab_size": vocab,
        "uniform_loss": math.log(vocab),
        "sides": [{"model": r.label, "prompt_loss": r.loss, "entropy": r.entropy,
                   "candidates": [{"id": c.token_id, "token": c.text, "probability": c.probability} for c in r.step.candidates]}
                  for r in results],
    }


def neighbours_data(word: str, sides: list[tuple[str, ArithmeticResult]]) -> dict[str, Any]:
    """Both sides' nearest tokens of ``word`` (:func:`compare.compare_neighbours`): id, token (its
    whitespace visible, as the Embeddings tab lists it), cosine similarity, count in training."""
    return {
        "word": word,
        "sides": [{"model": label, "formula": r.formula,
                   "neighbours": [{"id": n.id, "token": n.token, "similarity": n.similarity, "count": n.count} for n in r.neighbours]}
                  for label, r in sides],
    }


def attention_data(sentence: str, sides: list[tuple[str, AttentionResult]]) -> dict[str, Any]:
    """Both sides' attention on ``sentence`` at one layer and head (:func:`compare.compare_attention`):
    the token labels and each side's [T, T] causal weights."""
    first = sides[0][1]
    return {
        "sentence": sentence,
        "ids": list(first.ids),
        "tokens": list(first.tokens),
        "layer": first.layer,
        "head": first.head,
        "sides": [{"model": label, "layer": r.layer, "head": r.head, "weights": r.weights[r.layer, r.head].tolist()}
                  for label, r in sides],
    }


def compare_data(prompt: Any = cmp.EXAMPLE_PROMPT, word: Any = cmp.EXAMPLE_WORD, sentence: Any = cmp.EXAMPLE_SENTENCE,
                 layer: Any = None, head: Any = None, comparison: cmp.Comparison | None = None) -> dict[str, Any]:
    """The three comparisons of ``comparison`` (default: the model shown beside its untrained
    initialisation) as the tab shows them: attention at ``layer`` and ``head``, each by default
    where the tab opens (the shown model's clearest head on the tab's own sentence,
    :func:`compare.opening_head`, whatever the sentence compared)."""
    comparison = comparison or cmp.Comparison()
    if layer is None or head is None:
        opening = cmp.opening_head(cmp.EXAMPLE_SENTENCE, comparison)
        layer = opening.layer if layer is None else layer
        head = opening.head if head is None else head
    return {
        "labels": list(comparison.labels()),
        "next": next_data(prompt, cmp.compare_next_token(prompt, comparison=comparison), comparison.vocab_size()),
        "neighbours": neighbours_data(word, cmp.compare_neighbours(word, comparison=comparison)),
        "attention": attention_data(sentence, cmp.compare_attention(sentence, layer, head, comparison)),
    }
