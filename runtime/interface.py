"""The ONNX graph's interface, Hugging Face Optimum's GPT-2 decoder: what ``python -m export``
writes and what the engine feeds and reads (transformers.js and Optimum load it by these names).

Inputs ``input_ids`` [batch, sequence], ``attention_mask`` [batch, past + sequence],
``position_ids`` [batch, sequence] and ``past_key_values.{i}.key/.value`` [batch, head, past,
head_dim]; outputs ``logits`` [batch, sequence, vocab] and ``present.{i}.key/.value``.
"""

from __future__ import annotations

INPUT_IDS = "input_ids"
ATTENTION_MASK = "attention_mask"
POSITION_IDS = "position_ids"
LOGITS = "logits"

# Dimension names: transformers.js sizes its empty cache from them (only "batch_size" becomes
# the batch, every other name 0), Optimum's exporter writes the same.
BATCH = "batch_size"
SEQ = "sequence_length"
PAST = "past_sequence_length"
TOTAL = "past_sequence_length + sequence_length"


def past_names(n_layer: int) -> list[str]:
    """``past_key_values.{i}.key`` / ``.value`` for each layer, in graph input order."""
    return [f"past_key_values.{i}.{kind}" for i in range(n_layer) for kind in ("key", "value")]


def present_names(n_layer: int) -> list[str]:
    """``present.{i}.key`` / ``.value`` for each layer, in graph output order."""
    return [f"present.{i}.{kind}" for i in range(n_layer) for kind in ("key", "value")]
