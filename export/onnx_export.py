"""PyTorch GPT -> one self-contained fp32 ONNX file with Optimum's GPT-2 decoder interface.

Inputs ``input_ids``, ``attention_mask``, ``position_ids``, ``past_key_values.{i}.key/.value``;
outputs ``logits``, ``present.{i}.key/.value`` (docs/export.md has the table). The graph always
takes a past: on the first call it has length 0.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import onnx
import torch

from model import GPT
from runtime.interface import (
    ATTENTION_MASK, BATCH, INPUT_IDS, LOGITS, PAST, POSITION_IDS, SEQ, TOTAL, past_names, present_names,
)

from .metadata import set_metadata

OPSET = 20  # Gelu(approximate="tanh") is a single op from opset 20 on
# onnx 1.23 writes IR 14 by default, which onnxruntime 1.31 refuses (it reads up to 13); IR 10
# (onnx 1.16) is enough for opset 20 and readable by every onnxruntime since 1.17.
IR_VERSION = 10


class DecoderGPT(torch.nn.Module):
    """The GPT with a flat signature: (input_ids, attention_mask, position_ids, *past) -> (logits, *present)."""

    def __init__(self, model: GPT) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor, past: list[torch.Tensor]
    ) -> tuple[torch.Tensor, ...]:
        pairs = tuple((past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2))
        out = self.model(
            input_ids, past_key_values=pairs, attention_mask=attention_mask, position_ids=position_ids, use_cache=True
        )
        return (out.logits, *(t for kv in out.past_key_values for t in kv))


def export_fp32(model: GPT, path: Path, metadata: dict[str, str]) -> Path:
    """Export ``model`` (eval mode, CPU) to ``path`` with dynamic batch, sequence and past length."""
    cfg = model.config
    n = 2 * cfg.n_layer
    # Example sizes > 1 everywhere: torch.export specialises dimensions it sees as 0 or 1.
    batch, seq, past = 2, 3, 4
    ids = torch.randint(0, cfg.vocab_size, (batch, seq))
    mask = torch.ones(batch, past + seq, dtype=torch.int64)
    positions = torch.arange(past, past + seq).expand(batch, seq).contiguous()
    cache = [torch.zeros(batch, cfg.n_head, past, cfg.head_dim) for _ in range(n)]
    b, s, p = torch.export.Dim(BATCH), torch.export.Dim(SEQ), torch.export.Dim(PAST)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the exporter's deprecation chatter is not for our users
        program = torch.onnx.export(
            DecoderGPT(model.eval()),
            (ids, mask, positions, cache),
            dynamo=True,
            external_data=False,
            opset_version=OPSET,
            input_names=[INPUT_IDS, ATTENTION_MASK, POSITION_IDS, *past_names(cfg.n_layer)],
            output_names=[LOGITS, *present_names(cfg.n_layer)],
            # The mask's length is past + new; torch.export cannot declare a sum of two dims, so it
            # infers it (AUTO) and _name_dims names it.
            dynamic_shapes=({0: b, 1: s}, {0: b, 1: torch.export.Dim.AUTO}, {0: b, 1: s}, [{0: b, 2: p}] * n),
            optimize=True,
            verbose=False,
        )
    proto = program.model_proto
    proto.ir_version = min(proto.ir_version, IR_VERSION)
    _name_dims(proto)
    set_metadata(proto, metadata)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(proto, str(path))
    return path


def _name_dims(proto: onnx.ModelProto) -> None:
    """Optimum's dimension names everywhere (the exporter writes expressions like s0 + s1)."""
    labels = {INPUT_IDS: [BATCH, SEQ], POSITION_IDS: [BATCH, SEQ], ATTENTION_MASK: [BATCH, TOTAL], LOGITS: [BATCH, SEQ, None]}
    for value in [*proto.graph.input, *proto.graph.output]:
        if value.name in labels:
            names = labels[value.name]
        elif value.name.startswith("past_key_values."):
            names = [BATCH, None, PAST, None]
        else:
            names = [BATCH, None, TOTAL, None]
        for dim, label in zip(value.type.tensor_type.shape.dim, names):
            if label is not None and not dim.HasField("dim_value"):
                dim.dim_param = label
    # Intermediate shapes keep the exporter's private symbols; they would only contradict the names.
    del proto.graph.value_info[:]
