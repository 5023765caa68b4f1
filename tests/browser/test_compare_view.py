"""Compare's view (web/views/compare.js) says what the numbers mean as the lesson does, the same in
both editions: how spread out a head's rows are and the weight on the token just before, against
the definitions on hand-made heads; one log-scale probability axis for both sides; percentages as
playground.plots.percent writes them; the losses against ln V. Under Node.js, no browser (the
drawn tab: tests/browser/test_static_compare.py)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from playground.plots import percent

SCRIPT = Path(__file__).resolve().parents[1] / "web" / "compare_view.mjs"


def previous_token_head(t: int) -> np.ndarray:
    w = np.zeros((t, t))
    w[0, 0] = 1.0
    w[np.arange(1, t), np.arange(t - 1)] = 1.0
    return w


def even_head(t: int) -> np.ndarray:
    return np.tril(np.ones((t, t))) / np.arange(1, t + 1)[:, None]


def side(model: str, ps: list[float], loss: float | None, entropy: float) -> dict:
    return {"model": model, "prompt_loss": loss, "entropy": entropy,
            "candidates": [{"id": i, "token": f" t{i}", "probability": p} for i, p in enumerate(ps)]}


@pytest.fixture(scope="module")
def answer():
    assert shutil.which("node"), "node not found: the view's tests need Node.js 20"
    request = {
        "spreads": [previous_token_head(6).tolist(), even_head(6).tolist(), [[1.0]]],
        "uniform": [2, 3, 9],
        "percents": [0.153, 0.01, 0.00999, 0.0001993, 1 / 50257, 2.5e-7, 0.0, 1.0],
        "next": {"vocab_size": 50257, "uniform_loss": math.log(50257),
                 "sides": [side("trained model", [0.15, 0.09, 0.02], 1.6744, 4.559), side("untrained initialisation", [1.1e-4, 7e-5, 6e-5], 10.9017, 10.7735)]},
        "attention": {"layer": 3, "head": 5, "tokens": ["a", "b", "c", "d"],
                      "sides": [{"model": "trained model", "layer": 3, "head": 5, "weights": previous_token_head(4).tolist()},
                                {"model": "untrained initialisation", "layer": 3, "head": 5, "weights": even_head(4).tolist()}]},
    }
    proc = subprocess.run(["node", str(SCRIPT)], input=json.dumps(request), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return request, json.loads(proc.stdout)


def test_head_spread_is_each_rows_entropy_and_the_weight_just_before(answer):
    _, got = answer
    t = 6
    assert got["spreads"][0] == {"entropy": 0, "previous": 1}
    assert got["spreads"][1]["entropy"] == pytest.approx(sum(math.log(q + 1) for q in range(t)) / t)
    assert got["spreads"][1]["previous"] == pytest.approx(sum(1 / (q + 1) for q in range(1, t)) / (t - 1))
    assert got["spreads"][2] == {"entropy": 0, "previous": None}  # one token: no token before it
    for n, u in zip((2, 3, 9), got["uniform"]):
        assert u["entropy"] == pytest.approx(sum(math.log(q + 1) for q in range(n)) / n)
        assert u["previous"] == pytest.approx(sum(1 / (q + 1) for q in range(1, n)) / (n - 1))


def test_percentages_read_as_the_app_writes_them(answer):
    request, got = answer
    assert got["percents"] == [percent(p) for p in request["percents"]]  # 15.3%, 1.0%, 0.0002%, ...


def test_both_sides_share_one_log_probability_axis(answer):
    """A 0.01 % bar and a 15 % one on axes of their own looked alike: one axis from a decade at or
    below half the smallest bar to past the largest, a tick at each power of ten within it."""
    request, got = answer
    ps = [c["probability"] for s in request["next"]["sides"] for c in s["candidates"]]
    axis = got["axis"]
    assert axis["low"] == math.floor(math.log10(min(ps) / 2)) and axis["high"] == pytest.approx(math.log10(max(ps)) + 0.75)
    shown = [e for e in range(axis["low"], 1) if e <= axis["high"]]  # 100 % only when a bar nears it
    assert [t["exponent"] for t in axis["ticks"]] == shown and shown[-1] == -1
    assert [t["text"] for t in axis["ticks"]] == [f"{100 * 10.0**e:g}%" for e in shown]


def test_the_loss_line_sets_both_losses_against_ln_v(answer):
    _, got = answer
    line = got["loss"]
    assert line.startswith("trained model: loss on the prompt 1.67 nats, next-token entropy 4.56 · untrained initialisation: loss on the prompt 10.90 nats")
    assert "A uniform guess over the 50,257 tokens scores ln 50,257 = 10.82" in line
    assert f"the left chart's top candidate has 15.0%, the right's {percent(1.1e-4)}, a factor of {round(0.15 / 1.1e-4):,}." in line


def test_the_heads_line_says_how_sharp_each_side_is_beside_an_even_spread(answer):
    _, got = answer
    even = even_head(4)
    entropy = float(-(even * np.log(np.clip(even, 1e-12, 1))).sum(-1).mean())
    previous = 100 * np.mean(np.diagonal(even, -1))
    assert got["heads"].startswith("Layer 3, head 5: how spread out each token's attention is")
    assert "trained model 0.00 nats, 100 %" in got["heads"]
    assert got["heads"].endswith(f"untrained initialisation {entropy:.2f} nats, {previous:.0f} %; an even spread {entropy:.2f} nats, {previous:.0f} %.")
