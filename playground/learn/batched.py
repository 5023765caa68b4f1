"""One training step for several GPTs of the same shape at once: their parameters stacked, the
forward and backward passes run as one batched computation (``torch.func.functional_call`` under
``vmap``), then each model's own gradient clipping and AdamW update.

The math is :func:`model.train.train_step`'s, reused where it lives: each model's learning rate
(``lr_at``) and its batch (:func:`.batches.batch`, the rule the browser shares), the loss (``lm_loss``), ``clip_grad_norm_`` and its own
``torch.optim.AdamW``. Only the forward and backward passes are batched, so each model's settings
(seed, learning rate, init, step) stay its own. tests/lessons/test_learn.py checks the step
against ``train_step``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.func import functional_call, vmap
from torch.nn import functional as F

from model.gpt import GPT
from model.train import TrainConfig, lm_loss, lr_at

from .batches import batch

__all__ = ["Learner", "batched_step", "shape_key", "alone"]


@dataclass
class Learner:
    """One model in a batched step: the model, its optimizer, its settings and its next step."""

    model: GPT
    opt: torch.optim.Optimizer
    tc: TrainConfig
    step: int = 0


def shape_key(model: GPT) -> tuple:
    """Models with the same key can be stacked: the same parameter names and shapes."""
    return tuple((name, tuple(p.shape)) for name, p in model.named_parameters())


class _TiedHead:
    """``lm_loss`` reads ``model.lm_head``: the output head tied to the (stacked) token embedding."""

    def __init__(self, wte: torch.Tensor) -> None:
        self.wte = wte

    def lm_head(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h, self.wte)


def _nll(base: GPT, mask: torch.Tensor, positions: torch.Tensor, params: dict, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """One model's cross-entropy on its batch, with ``params`` in place of ``base``'s. The
    attention mask and positions are passed so that attention takes its explicit path
    (q·kᵀ/√d, mask, softmax, @ V): ``vmap`` has no batching rule for the fused kernel and would
    run it model by model."""

    def forward(idx: torch.Tensor, head: bool = True):
        return functional_call(base, params, (idx,), {"head": head, "attention_mask": mask, "position_ids": positions})

    _, nll = lm_loss(forward, _TiedHead(params["wte.weight"]), x, y)
    return nll


def batched_step(learners: Sequence[Learner], data: np.ndarray) -> list[float]:
    """One optimizer step of every learner (same shape, same ``data``): each on the batch of its
    own (seed, step), at the learning rate of its own step. Returns each learner's loss before its
    update, as ``train_step`` does, and advances each learner's ``step``."""
    if not learners:
        return []
    base = learners[0].model
    key = shape_key(base)
    if any(shape_key(learner.model) != key for learner in learners[1:]):
        raise ValueError("batched_step stacks models of one shape only")
    names = [name for name, _ in base.named_parameters()]
    own = [[p for _, p in learner.model.named_parameters()] for learner in learners]
    stacked = {
        name: torch.stack([params[i].detach() for params in own]).requires_grad_()
        for i, name in enumerate(names)
    }
    block = base.config.block_size
    xs, ys = [], []
    for learner in learners:
        x, y = batch(data, learner.tc.seed, learner.step, block, learner.tc.batch_size)
        xs.append(x)
        ys.append(y)
        for group in learner.opt.param_groups:
            group["lr"] = lr_at(learner.step, learner.tc)
    x, y = torch.stack(xs), torch.stack(ys)  # [R, B, T]
    mask = torch.ones(x.shape[1:], dtype=torch.long)
    positions = torch.arange(x.shape[-1]).unsqueeze(0)
    nll = vmap(lambda p, xi, yi: _nll(base, mask, positions, p, xi, yi))(stacked, x, y)  # [R]
    grads = torch.autograd.grad(nll.sum(), [stacked[name] for name in names])
    for r, (learner, params) in enumerate(zip(learners, own)):
        for p, g in zip(params, grads):
            p.grad = g[r]
        torch.nn.utils.clip_grad_norm_(params, learner.tc.grad_clip)
        learner.opt.step()
        learner.opt.zero_grad(set_to_none=True)
        learner.step += 1
    return nll.detach().tolist()


def alone(s, data: np.ndarray, vocab_size: int, steps: int | None = None) -> tuple[list[float], GPT]:
    """The server's curve for settings ``s`` (playground.learn.run's): its model stepped alone on
    one PyTorch thread, as the trainer steps it, ``steps`` steps (default its own) with neither
    samples nor the seconds cap (a loaded machine reached the cap before step 500); the losses
    and the trained model. What the browser's runs are measured against."""
    from model.train import adamw

    from .run import build_model, train_config

    tc = train_config(s)
    model = build_model(s, vocab_size)
    learner = Learner(model, adamw(model, tc), tc)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return [batched_step([learner], data)[0] for _ in range(s.steps if steps is None else steps)], model
    finally:
        torch.set_num_threads(threads)
