"""Watch it learn's draws in the browser (web/engine/learn.js under Node.js) against the server's
(playground/learn/): the same batches (starts, inputs, targets) for the same seed and step, the same
float32 initial weights for the same seed, size, position kind and start (the skewed start's x10
included), the same learning rate at every step of the schedule, and the held-out score's
cross-entropy. The whole run, in Chromium, against PyTorch: tests/browser/test_static_learn.py."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from model.train import lr_at
from playground.initial import init_spec
from playground.learn import run as learn_run
from playground.learn.batches import batch, batch_starts

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "web" / "learn_draws.mjs"
VOCAB = 84

# (seed, step, rows, block): the page's batch at steps 0, 1 and the last of a long run, the largest
# seed, and a small text whose last window ends at its last id.
BATCHES = [(0, 0, 16, 64), (0, 1, 16, 64), (7, 4999, 16, 64), (2**31 - 1, 123, 16, 64), (3, 2, 300, 20)]
STARTS = [(size, positions, init, seed) for size, positions, init, seed in [
    ("tiny", "learned", "proper", 0), ("tiny", "learned", "skewed", 0), ("small", "sinusoidal", "skewed", 2**31 - 1),
]]


@pytest.fixture(scope="module")
def answer(tmp_path_factory):
    node = shutil.which("node")
    assert node, "node not found: the browser engine's tests need Node.js 20"
    data = np.random.default_rng(0).integers(0, VOCAB, 3_000).astype(np.uint8)
    data[-1] = VOCAB - 1  # a target only the very last window can read
    specs = []
    for size, positions, init, seed in STARTS:
        config = learn_run.model_config(learn_run.settings(size=size, positions=positions), VOCAB)
        specs.append({"spec": [p.to_json() for p in init_spec(config)], "seed": seed, "init": init, "skew": learn_run.SKEW})
    logits = np.random.default_rng(1).normal(0, 3, (40, VOCAB)).astype(np.float32)
    targets = np.random.default_rng(2).integers(0, VOCAB, 40)
    request = {
        "data": data.tolist(),
        "batches": [{"seed": s, "step": k, "rows": r, "block": b} for s, k, r, b in BATCHES],
        "weights": specs,
        "lr": [{"step": k, "lr": lr, "warmup": learn_run.WARMUP_STEPS} for lr in learn_run.LEARNING_RATES.values() for k in (0, 1, 48, 49, 50, 4999)],
        "entropy": {"logits": logits.flatten().tolist(), "targets": targets.tolist(), "V": VOCAB},
    }
    path = tmp_path_factory.mktemp("learn") / "request.json"
    path.write_text(json.dumps(request))
    result = subprocess.run([node, str(SCRIPT), str(path)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return data, logits, targets, json.loads(result.stdout)


def test_the_browser_draws_the_servers_batches(answer):
    data, _, _, got = answer
    for (seed, step, rows, block), js in zip(BATCHES, got["batches"]):
        starts = batch_starts(seed, step, len(data), block, rows)
        assert js["starts"] == starts.tolist(), (seed, step)
        x, y = batch(data, seed, step, block, rows)
        assert js["idx"] == x.flatten().tolist() and js["targets"] == y.flatten().tolist(), (seed, step)
        assert (y[:, :-1] == x[:, 1:]).all()  # the targets are the inputs moved by one
        assert starts.max() <= len(data) - block - 1
    # Every window of the text can be drawn, the last one too (the rule's bound is not one fewer).
    assert set(batch_starts(3, 2, 22, 20, 300).tolist()) == {0, 1}


def test_the_browser_draws_the_servers_initial_weights(answer):
    _, _, _, got = answer
    for (size, positions, init, seed), js in zip(STARTS, got["weights"]):
        model = learn_run.build_model(learn_run.settings(seed=seed, init=init, size=size, positions=positions), VOCAB)
        expected = {name: p.detach().numpy() for name, p in model.named_parameters()}
        assert set(js) == set(expected)
        for name, w in expected.items():
            browser = np.frombuffer(base64.b64decode(js[name]["data"]), "<f4").reshape(js[name]["dims"])
            assert np.array_equal(browser, w), (size, positions, init, name)
        if init == "skewed":  # the x10 is on the token embedding only
            plain = learn_run.build_model(learn_run.settings(seed=seed, size=size, positions=positions), VOCAB)
            assert torch.equal(plain.wte.weight * learn_run.SKEW, model.wte.weight)


def test_the_browser_schedules_the_servers_learning_rates(answer):
    _, _, _, got = answer
    expected = [lr_at(k, learn_run.train_config(learn_run.settings(learning_rate=name)))
                for name in learn_run.LEARNING_RATES for k in (0, 1, 48, 49, 50, 4999)]
    assert got["lr"] == expected  # the same doubles


def test_the_browser_scores_cross_entropy_as_torch(answer):
    _, logits, targets, got = answer
    expected = F.cross_entropy(torch.from_numpy(logits).double(), torch.from_numpy(targets)).item()
    assert got["entropy"] == pytest.approx(expected, abs=1e-9)
