"""Weights and optimizer state as safetensors (never pickle), for training runs and shipped models."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from .gpt import GPT


def save_weights(model: GPT, path: Path) -> None:
    # The tied head shares wte's storage; save it once, under the embedding's name.
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(state, str(path))


def load_weights(model: GPT, path: Path) -> None:
    missing, unexpected = model.load_state_dict(load_file(str(path)), strict=False)
    missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:
        raise RuntimeError(f"{path}: missing {missing}, unexpected {unexpected}")


def save_optimizer(opt: torch.optim.Optimizer, model: GPT, path: Path) -> None:
    """Optimizer moments, keyed by parameter name."""
    names = {id(p): n for n, p in model.named_parameters()}
    tensors = {}
    for group in opt.param_groups:
        for p in group["params"]:
            for k, v in opt.state.get(p, {}).items():
                tensors[f"{names[id(p)]}.{k}"] = v.detach().cpu().reshape(v.shape).contiguous()
    save_file(tensors, str(path))


def load_optimizer(opt: torch.optim.Optimizer, model: GPT, path: Path) -> None:
    tensors = load_file(str(path))
    for name, p in model.named_parameters():
        state = {k: tensors[f"{name}.{k}"].to(p.device) for k in ("step", "exp_avg", "exp_avg_sq") if f"{name}.{k}" in tensors}
        if state:
            opt.state[p] = state
