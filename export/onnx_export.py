"""PyTorch GPT -> one self-contained fp32 ONNX file with a key/value cache."""

from __future__ import annotations

import warnings
from pathlib import Path

import onnx
import torch

from model import GPT

from .metadata import set_metadata
from .naming import INPUT_IDS, LOGITS, past_names, present_names

OPSET = 20  # Gelu(approximate="tanh") is a single op from opset 20 on
# onnx 1.23 writes IR 14 by default, which onnxruntime 1.31 refuses (it reads up to 13); IR 10
# (onnx 1.16) is enough for opset 20 and readable by every onnxruntime since 1.17.
IR_VERSION = 10


class CachedGPT(torch.nn.Module):
    """The GPT with a flat cache signature: (input_ids, *past) -> (logits, *present)."""

    def __init__(self, model: GPT) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, past: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        pairs = tuple((past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2))
        out = self.model(input_ids, past_key_values=pairs, use_cache=True)
        return (out.logits, *(t for kv in out.past_key_values for t in kv))


def export_fp32(model: GPT, path: Path, metadata: dict[str, str]) -> Path:
    """Export ``model`` (eval mode, CPU) to ``path`` with dynamic batch, seq and past length."""
    cfg = model.config
    n = 2 * cfg.n_layer
    # Example sizes > 1 everywhere: torch.export specialises dimensions it sees as 0 or 1.
    batch, seq, past = 2, 3, 4
    ids = torch.randint(0, cfg.vocab_size, (batch, seq))
    cache = [torch.zeros(batch, cfg.n_head, past, cfg.head_dim) for _ in range(n)]
    b, s, p = torch.export.Dim("batch"), torch.export.Dim("seq"), torch.export.Dim("past_seq")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the exporter's deprecation chatter is not for our users
        program = torch.onnx.export(
            CachedGPT(model.eval()),
            (ids, cache),
            dynamo=True,
            external_data=False,
            opset_version=OPSET,
            input_names=[INPUT_IDS, *past_names(cfg.n_layer)],
            output_names=[LOGITS, *present_names(cfg.n_layer)],
            dynamic_shapes=({0: b, 1: s}, [{0: b, 2: p}] * n),
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
    """Give present/logits dims readable names (the exporter writes expressions like s0 + s1)."""
    for value in proto.graph.output:
        dims = value.type.tensor_type.shape.dim
        if value.name == LOGITS:
            labels = ["batch", "seq", None]
        else:
            labels = ["batch", None, "past_seq + seq", None]
        for dim, label in zip(dims, labels):
            if label is not None and not dim.HasField("dim_value"):
                dim.dim_param = label
