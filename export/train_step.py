"""Watch it learn's training step as ONNX: forward, backward, gradient clipping and the AdamW update
of one batch, one graph per model size and position kind, for a runtime that cannot train
(onnxruntime-web lost its training API upstream in 2024) to run as an ordinary graph.

    python -m playground.learn.step_graphs DIR      # DIR/train_step-tiny-learned.onnx ... (four files)
    python -m playground.learn.step_graphs DIR --vocab-size 65 --sizes tiny --positions learned

Nothing is written twice: the model is model/gpt.py's ``GPT`` as Watch it learn builds it
(``playground.learn.run.SIZES``; ``learn_model`` there builds it), the loss is model/train.py's ``lm_loss`` and the update its
``clipped_adamw`` (``train_step``'s clipping and AdamW, as a pure function). The step is traced
into aten operators by ``make_fx`` over ``torch.func.grad_and_value``, with PyTorch's core ATen
decompositions and attention in its math form (the fused CPU kernel's backward has no ONNX
translation), and that graph is exported by ``torch.onnx.export(..., dynamo=True)``.

The graph's interface (``step_names``): inputs each parameter by its ``named_parameters`` name
(``wte.weight`` ...; the tied output head is ``wte.weight``), the moments ``m.<name>`` and
``v.<name>``, the batch ``idx`` and ``targets`` [batch, block] int64 (``get_batch``'s), ``lr``
(float32, ``lr_at``'s) and ``step`` (int64, the updates made before); outputs ``loss`` (the
cross-entropy before the update, as ``train_step`` returns it), ``grad_norm`` (before clipping),
then ``new.<name>``, ``new.m.<name>``, ``new.v.<name>``: fed back as the next step's inputs.
Shapes are fixed (the tab's batch of 16 x 64 characters and the vocabulary's size).
tests/export/test_train_step.py runs it against ``train_step``.
"""

from __future__ import annotations

import os
import types
from pathlib import Path

import numpy as np
import onnx
import onnxscript.optimizer
import torch
from torch.func import functional_call, grad_and_value
from torch.nn import functional as F

from model.gpt import GPT
from model.train import ADAM_EPS, TrainConfig, clipped_adamw, lm_loss

__all__ = ["step_names", "step_function", "export_step", "file_name", "main"]

FOLD_LIMIT = 4096  # the largest tensor (elements) the optimizer may fold into the file: a 64 x 64 table
# AdamW's eps as a one-element tensor, not a scalar: onnxscript's optimizer (0.7) removes ``x + c``
# as adding zero wherever |c| <= 1e-8 (its pattern's default abs_tol), which is AdamW's eps; the
# update then divided a zero first moment by a zero second moment's root (0/0 = NaN) wherever a
# gradient was exactly zero (a key bias can be), and the weights turned NaN the next step. Its
# rules match scalar constants only; ``export_step`` checks the graph kept one eps per parameter.
EPS = torch.full((1,), ADAM_EPS)


def file_name(size: str, positions: str) -> str:
    return f"train_step-{size}-{positions}.onnx"


def step_names(model: GPT) -> tuple[list[str], list[str]]:
    """(input names, output names) of the step graph of ``model``'s shape, in the graph's order."""
    names = [name for name, _ in model.named_parameters()]
    inputs = [*names, *(f"m.{n}" for n in names), *(f"v.{n}" for n in names), "idx", "targets", "lr", "step"]
    outputs = ["loss", "grad_norm", *(f"new.{n}" for n in inputs[: 3 * len(names)])]
    return inputs, outputs


def step_function(model: GPT, tc: TrainConfig):
    """The step as a function of flat tensors, in :func:`step_names`'s order: (params..., m...,
    v..., idx, targets, lr, step) -> (loss, grad_norm, new params..., new m..., new v...)."""
    names = [name for name, _ in model.named_parameters()]
    n = len(names)

    def nll(params: dict[str, torch.Tensor], idx: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the loss to minimise, the plain cross-entropy to report), as train_step's lm_loss."""
        def forward(x: torch.Tensor, head: bool = True):
            return functional_call(model, params, (x,), {"head": head})

        # lm_loss reads the output head from its model argument: the head tied to the traced embedding.
        head = types.SimpleNamespace(lm_head=lambda h: F.linear(h, params["wte.weight"]))
        loss, plain = lm_loss(forward, head, idx, targets, label_smoothing=tc.label_smoothing)
        return loss, plain

    def step(*flat: torch.Tensor):
        params, m, v = list(flat[:n]), list(flat[n : 2 * n]), list(flat[2 * n : 3 * n])
        idx, targets, lr, count = flat[3 * n :]
        grads, (_, plain) = grad_and_value(nll, has_aux=True)(dict(zip(names, params)), idx, targets)
        new_p, new_m, new_v, norm = clipped_adamw(params, [grads[k] for k in names], m, v, count, lr, tc, eps=EPS)
        return (plain, norm, *new_p, *new_m, *new_v)

    return step


def example_inputs(model: GPT, tc: TrainConfig) -> list[torch.Tensor]:
    """Inputs of the right shapes and types: the model's weights, zero moments, a batch of zeros."""
    params = [p.detach().clone() for p in model.parameters()]
    batch = torch.zeros(tc.batch_size, model.config.block_size, dtype=torch.long)
    return [
        *params, *(torch.zeros_like(p) for p in params), *(torch.zeros_like(p) for p in params),
        batch, batch.clone(), torch.tensor(tc.lr, dtype=torch.float32), torch.tensor(0, dtype=torch.long),
    ]


def export_step(model: GPT, tc: TrainConfig, path: Path) -> Path:
    """Write ``model``'s training step (settings ``tc``: batch size, grad_clip, beta2, weight decay,
    label smoothing) to ``path`` as ONNX."""
    from torch._decomp import core_aten_decompositions
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from .build import _quiet_logs

    if model.config.dropout:
        raise ValueError("the step graph has no dropout: export a model with dropout 0")
    example = example_inputs(model, tc)
    was_training = model.training
    model.eval()  # dropout 0 either way: eval keeps the trace free of dropout's no-op
    try:
        with sdpa_kernel(SDPBackend.MATH):  # attention as matmul, softmax, matmul: each has an ONNX form
            graph = make_fx(step_function(model, tc), decomposition_table=core_aten_decompositions())(*example)
    finally:
        model.train(was_training)
    graph.eval()  # (the traced module's own flag: the exporter warns about a module in training mode)
    inputs, outputs = step_names(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _quiet_logs():
        program = torch.onnx.export(
            graph, tuple(example), dynamo=True, input_names=inputs, output_names=outputs, optimize=False,
            verbose=False,
        )
    # onnxscript's optimizer folds the constant parts and fuses (1,586 nodes become 848 for tiny),
    # but only small results: left to its default limit it stored four zero-filled tensors the
    # step makes (1.4 MB of the tiny step's 2 MB); the exporter's per-node notes (where each node
    # came from in the trace) were another 0.85 MB.
    proto = onnxscript.optimizer.optimize(program.model_proto, output_size_limit=FOLD_LIMIT)
    for node in proto.graph.node:
        del node.metadata_props[:]
    kept, n_params = eps_adds(proto), len(list(model.parameters()))
    if kept != n_params:
        raise RuntimeError(f"the optimized step graph adds AdamW's eps {kept} times, not once per parameter "
                           f"({n_params}): an optimizer rule removed it")
    tmp = path.with_suffix(".tmp.onnx")
    onnx.save(proto, tmp)
    os.replace(tmp, path)
    return path


def eps_adds(proto: onnx.ModelProto) -> int:
    """How many Add nodes of the graph add AdamW's eps (a constant equal to it in float32)."""
    eps = np.float32(ADAM_EPS)
    consts = {t.name for t in proto.graph.initializer if onnx.numpy_helper.to_array(t).size == 1
              and onnx.numpy_helper.to_array(t).astype(np.float32).item() == eps}
    consts |= {o for n in proto.graph.node if n.op_type == "Constant" for o in n.output
               if onnx.numpy_helper.to_array(n.attribute[0].t).size == 1
               and onnx.numpy_helper.to_array(n.attribute[0].t).astype(np.float32).item() == eps}
    return sum(1 for n in proto.graph.node if n.op_type == "Add" and consts.intersection(n.input))
