"""A fresh GPT drawn from the shared generator (playground/initial.py, web/engine/init.js): GPT-2's
initialisation rule, one rule for torch's draws and for these, and the same weights in PyTorch and
in the browser for the same seed."""

from __future__ import annotations

import base64
import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from model.gpt import GPT, GPTConfig, init_rule
from playground.initial import drawn_gpt, init_spec, initial_state

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "web" / "initial.mjs"
CONFIGS = [
    GPTConfig(vocab_size=84, block_size=64, n_layer=2, n_head=2, d_model=64),
    GPTConfig(vocab_size=300, block_size=32, n_layer=3, n_head=4, d_model=32, pos_encoding="sinusoidal"),
    # an embedding of 281,600 weights: drawn in several pieces by both sides (init.js 65,536 a piece, initial.py 262,144)
    GPTConfig(vocab_size=1100, block_size=16, n_layer=1, n_head=2, d_model=256),
]


def test_the_rule_is_gpt2s():
    cfg = CONFIGS[0]
    assert init_rule("wte.weight", cfg) == ("normal", 0.02)
    assert init_rule("blocks.1.attn.c_attn.weight", cfg) == ("normal", 0.02)
    assert init_rule("blocks.0.attn.c_proj.weight", cfg) == ("normal", 0.02 / math.sqrt(4))
    assert init_rule("blocks.0.mlp.c_proj.weight", cfg) == ("normal", 0.02 / math.sqrt(4))
    assert init_rule("blocks.0.mlp.c_proj.bias", cfg) == ("zeros", 0.0)
    assert init_rule("blocks.0.ln_2.weight", cfg) == ("ones", 0.0)
    assert init_rule("ln_f.bias", cfg) == ("zeros", 0.0)


@pytest.mark.parametrize("cfg", CONFIGS, ids=["learned", "sinusoidal", "in pieces"])
def test_torch_and_the_draws_follow_one_rule(cfg):
    """Every parameter of GPT(config) (torch's draws) and of drawn_gpt (the shared generator's) is
    what init_rule says: the zeros and ones exact, each normal's spread within 10 % of its std."""
    torch_model = GPT(cfg, generator=torch.Generator().manual_seed(1))
    drawn = drawn_gpt(cfg, seed=1)
    spec = init_spec(cfg)
    assert [p.name for p in spec] == [n for n, _ in torch_model.named_parameters()] == [n for n, _ in drawn.named_parameters()]
    assert drawn.lm_head.weight is drawn.wte.weight  # still tied
    for p in spec:
        for model in (torch_model, drawn):
            w = dict(model.named_parameters())[p.name].detach()
            assert tuple(w.shape) == p.shape
            if p.kind == "normal":
                assert abs(w.std().item() / p.std - 1) < 0.1 and abs(w.mean().item()) < 3 * p.std / math.sqrt(w.numel()) + 1e-4, p.name
            else:
                assert torch.equal(w, torch.full_like(w, 1.0 if p.kind == "ones" else 0.0)), p.name
    if cfg.pos_encoding == "sinusoidal":
        assert torch.equal(drawn.pe, torch_model.pe)


def test_a_seed_gives_one_model():
    cfg = CONFIGS[0]
    a, b, c = initial_state(cfg, 7), initial_state(cfg, 7), initial_state(cfg, 8)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["wte.weight"], c["wte.weight"])
    # each parameter its own lane: two parameters of one shape do not repeat each other's numbers
    assert not torch.equal(a["blocks.0.attn.c_attn.weight"], a["blocks.1.attn.c_attn.weight"])
    drawn = drawn_gpt(cfg, 7)
    assert all(torch.equal(p.detach(), a[n]) for n, p in drawn.named_parameters())


@pytest.mark.parametrize("cfg", CONFIGS, ids=["learned", "sinusoidal", "in pieces"])
def test_the_browser_draws_the_same_weights(cfg, tmp_path):
    node = shutil.which("node")
    assert node, "node not found: the browser engine's tests need Node.js 20"
    seed = 2**31 - 1
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"spec": [p.to_json() for p in init_spec(cfg)], "seed": seed}))
    result = subprocess.run([node, str(SCRIPT), str(request)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    expected = initial_state(cfg, seed)
    assert set(got) == set(expected)
    for name, w in expected.items():
        browser = np.frombuffer(base64.b64decode(got[name]), "<f4").reshape(w.shape)
        assert np.array_equal(browser, w.numpy()), name  # float32: the platforms' last-ulp rounding of log and cos does not reach it
