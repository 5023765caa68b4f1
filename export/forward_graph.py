"""A GPT's forward pass as ONNX with its weights as inputs: logits of every position for a batch of
windows, the graph Watch it learn runs in the browser to sample its learner's model, score it on
the held-out windows and continue a prompt, on the weights its step graph (export/train_step.py)
has just written.

Inputs ``idx`` (int64 [batch, tokens], tokens up to the block size) and every parameter by its
``named_parameters`` name, as the step graph names them (so a step's ``new.<name>`` outputs feed
it as they are); output ``logits`` [batch, tokens, vocab]. The model is model/gpt.py's ``GPT``
itself (``functional_call``), so the browser's samples come from the arithmetic that trains.

Why a graph of its own rather than the step graph: a step is forward, backward and an update of
16 windows of 64, about three times a forward pass of the batch; a sample is 200 forward passes
of one short window, and a step graph has fixed shapes and no logits to give."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import onnx
import torch
from torch.func import functional_call

from model.gpt import GPT

from .onnx_export import IR_VERSION, OPSET

__all__ = ["forward_names", "export_forward", "file_name"]


def file_name(size: str, positions: str) -> str:
    return f"forward-{size}-{positions}.onnx"


def forward_names(model: GPT) -> tuple[list[str], list[str]]:
    """(input names, output names) of ``model``'s forward graph."""
    return ["idx", *(name for name, _ in model.named_parameters())], ["logits"]


class _Forward(torch.nn.Module):
    """(idx, *params) -> logits, the parameters passed in (the tied head is ``wte.weight``)."""

    def __init__(self, model: GPT) -> None:
        super().__init__()
        self.model = model
        self.names = [name for name, _ in model.named_parameters()]

    def forward(self, idx: torch.Tensor, params: list[torch.Tensor]) -> torch.Tensor:
        return functional_call(self.model, dict(zip(self.names, params)), (idx,)).logits


def export_forward(model: GPT, path: Path) -> Path:
    """Write ``model``'s forward graph (its shape, not its weights) to ``path``."""
    cfg = model.config
    was_training = model.training
    model.eval()
    params = [p.detach().clone() for p in model.parameters()]
    idx = torch.zeros(2, 3, dtype=torch.long)  # sizes above 1: torch.export specialises 0 and 1
    inputs, outputs = forward_names(model)
    batch, tokens = torch.export.Dim("batch", max=1024), torch.export.Dim("tokens", max=cfg.block_size)
    from .build import _quiet_logs

    try:
        with warnings.catch_warnings(), torch.no_grad(), _quiet_logs():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                _Forward(model), (idx, params), dynamo=True, external_data=False, opset_version=OPSET,
                input_names=inputs, output_names=outputs, dynamic_shapes=({0: batch, 1: tokens}, [None] * len(params)),
                optimize=True, verbose=False,
            )
    finally:
        model.train(was_training)
    proto = program.model_proto
    proto.ir_version = min(proto.ir_version, IR_VERSION)
    for node in proto.graph.node:
        del node.metadata_props[:]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.onnx")
    onnx.save_model(proto, str(tmp))
    os.replace(tmp, path)
    return path
