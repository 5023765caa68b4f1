"""A fresh GPT whose initial weights the browser can draw too: GPT-2's initialisation
(``model.gpt.init_rule``) filled from the generator the server and the browser share
(``runtime.draws``, stream ``INIT``, lane = the parameter's place in :func:`init_spec`), so a seed
gives the same untrained model in PyTorch and in ``web/engine/init.js``, with no weights to download.

    model = drawn_gpt(config, seed=0)          # a GPT, every weight from (seed, parameter, index)
    spec = init_spec(config)                   # what the browser needs to draw the same: names, shapes, rules
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from model.gpt import GPT, GPTConfig, init_rule
from runtime import draws

__all__ = ["ParamInit", "init_spec", "initial_state", "drawn_gpt"]


@dataclass(frozen=True)
class ParamInit:
    name: str  # as GPT's named_parameters() names it (the tied head is wte.weight)
    shape: tuple[int, ...]
    kind: str  # "normal", "zeros" or "ones"
    std: float  # of the normal (0 otherwise)
    lane: int  # its lane of the generator's INIT stream: its place in the list

    def to_json(self) -> dict:
        return {**asdict(self), "shape": list(self.shape)}


def init_spec(config: GPTConfig) -> list[ParamInit]:
    """Every parameter of a GPT of ``config``, in named_parameters() order, with its rule."""
    with torch.device("meta"):  # the shapes and names only: nothing is allocated or drawn
        named = list(GPT(config).named_parameters())
    return [ParamInit(name, tuple(p.shape), *init_rule(name, config), lane) for lane, (name, p) in enumerate(named)]


# Normals drawn per call: a full table at once (the embedding's 12.9 M) builds arrays of 200 MB
# and took 1.7 times as long as these cache-sized pieces (the same numbers: draw j depends on j only).
CHUNK = 1 << 18


def _values(p: ParamInit, seed: int) -> np.ndarray:
    n = int(np.prod(p.shape))
    if p.kind != "normal":
        return np.full(p.shape, 1.0 if p.kind == "ones" else 0.0, np.float32)
    out = np.empty(n, np.float32)
    for start in range(0, n, CHUNK):
        m = min(CHUNK, n - start)
        out[start:start + m] = draws.normal(seed, draws.INIT, m, start=start, lane=p.lane) * p.std
    return out.reshape(p.shape)


def initial_state(config: GPTConfig, seed: int) -> dict[str, torch.Tensor]:
    """The initial weights of a GPT of ``config`` drawn for ``seed``, by parameter name (float32)."""
    return {p.name: torch.from_numpy(_values(p, seed)) for p in init_spec(config)}


def drawn_gpt(config: GPTConfig, seed: int) -> GPT:
    """A GPT of ``config`` whose weights are :func:`initial_state` (torch's random state untouched)."""
    model = GPT(config, generator=torch.Generator().manual_seed(0))  # torch's draws are all overwritten below
    state = initial_state(config, seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(state[name])
    return model.eval()
