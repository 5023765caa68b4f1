"""Model tab logic (playground/model_info.py): parameter counts against GPT-2's formula, the
training curves from a log, the ONNX graph's interface, and the onnxruntime snippet run for real
(the other clients' snippets run in tests/serving/test_clients.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from model import GPT, GPTConfig, get_tokenizer, load_pretrained
from playground import model_info

ROOT = Path(__file__).resolve().parents[2]


def gpt2_formula(c: GPTConfig) -> int:
    """Parameters of a GPT-2 layout with a tied head, by hand: the embedding V*C, per block
    12*C^2 + 13*C (QKV, output projection, MLP up and down with biases, two LayerNorms), a
    final LayerNorm 2*C, and a learned position table if any."""
    n = c.vocab_size * c.d_model + c.n_layer * (12 * c.d_model**2 + 13 * c.d_model) + 2 * c.d_model
    return n + (c.block_size * c.d_model if c.pos_encoding == "learned" else 0)


@pytest.mark.parametrize("pos", ["sinusoidal", "learned"])
def test_parameter_counts_add_up_to_gpt2s_formula(pos):
    cfg = GPTConfig(vocab_size=1000, block_size=32, n_layer=3, n_head=4, d_model=64, pos_encoding=pos)
    model = GPT(cfg)
    rows = model_info.parameter_counts(model)
    assert sum(n for _, n in rows) == gpt2_formula(cfg) == model.num_parameters()
    parts = dict(rows)
    assert parts["token embedding wte [1000 × 64]"] == 1000 * 64
    assert parts["3 × attention W_Q, W_K, W_V [64 × 192]"] == 3 * (64 * 192 + 192)
    assert parts["3 × MLP up [64 × 256]"] == 3 * (64 * 256 + 256)
    table = model_info.architecture_rows(model)
    assert table[-1][0] == "total" and table[-1][1] == f"{gpt2_formula(cfg):,}"


def test_shipped_model_description_uses_its_config():
    model = load_pretrained()
    c = model.config
    text = model_info.architecture_markdown(model)
    assert f"**{c.n_layer} layers**" in text and f"**{c.n_head} heads**" in text and f"d_model = {c.d_model}" in text
    assert f"{gpt2_formula(c) / 1e6:.2f} M parameters" in text


def test_training_figure_plots_train_and_val_loss_against_tokens(tmp_path):
    log = [
        {"step": 0, "tokens": 0, "train_loss": float("nan"), "val_loss": 10.9},
        {"step": 250, "tokens": 1_024_000, "train_loss": 6.1, "val_loss": 6.3},
        {"step": 500, "tokens": 2_048_000, "train_loss": 5.2, "val_loss": 5.5},
    ]
    path = tmp_path / "training_log.json"
    path.write_text(json.dumps(log))  # json writes NaN, as model.train does
    fig = model_info.training_figure(model_info.load_training_log(path))
    traces = {t.name: t for t in fig.data}
    assert list(traces["validation loss"].x) == [0, 1_024_000, 2_048_000]
    assert list(traces["validation loss"].y) == [10.9, 6.3, 5.5]
    assert list(traces["train loss"].x) == [1_024_000, 2_048_000]  # the NaN at step 0 is left out
    assert "tokens" in fig.layout.xaxis.title.text


def test_a_new_runs_log_labels_the_subset_loss_and_shows_the_result_apart():
    """model.train logs what the training loss's softmax ran over and, at the last step, the
    loss on every validation window: the curve says the first, the figure shows the second as a
    point of its own instead of a drop in the validation curve."""
    log = [
        {"step": 0, "tokens": 0, "train_loss": None, "train_softmax_tokens": None, "val_loss": 10.9},
        {"step": 250, "tokens": 1_000, "train_loss": 6.1, "train_softmax_tokens": 19_219, "val_loss": 6.3},
        {"step": 500, "tokens": 2_000, "train_loss": 5.2, "train_softmax_tokens": 50_257, "val_loss": 5.5, "val_loss_all": 5.4},
    ]
    traces = {t.name: t for t in model_info.training_figure(log).data}
    train = [name for name in traces if name.startswith("train loss")]
    assert train == ["train loss (softmax over the 19,219 training tokens until step 250, then 50,257)"]
    assert list(traces["validation loss"].y) == [10.9, 6.3, 5.5]
    assert list(traces["validation, every window (the result)"].y) == [5.4]


def _validation(fig) -> tuple:
    """The chart's validation line (a sample of windows) and its result point (every window), by the
    names the chart gives them: each names its windows, e.g. "validation, a sample of 96 windows"."""
    traces = [t for t in fig.data if t.name.startswith("validation")]
    line = [t for t in traces if not t.name.endswith("(the result)")]
    result = [t for t in traces if t.name.endswith("(the result)")]
    return (line[0] if line else None), (result[0] if result else None)


def test_an_older_logs_whole_set_score_is_a_point_of_its_own():
    """The shipped run's log scored 96 held-out windows at each evaluation and all 255 at the
    last step, in the same field: joined by one line, the change of sample would read as a drop
    in loss. The whole-set score stands apart, as a new run's ``val_loss_all`` does."""
    log = [
        {"step": 0, "tokens": 0, "val_loss": 10.9, "val_windows": 96},
        {"step": 250, "tokens": 1_000, "train_loss": 6.1, "val_loss": 5.6, "val_windows": 96},
        {"step": 500, "tokens": 2_000, "train_loss": 5.2, "val_loss": 5.4, "val_windows": 96},
        {"step": 750, "tokens": 3_000, "train_loss": 5.0, "val_loss": 4.4, "val_windows": 255},
    ]
    fig = model_info.training_figure(log)
    line, result = _validation(fig)
    assert list(line.y) == [10.9, 5.6, 5.4] and "96 windows" in line.name
    assert list(result.x) == [3_000] and list(result.y) == [4.4] and "255 windows" in result.name
    # One sample size throughout: one line, nothing set apart.
    same = [dict(e, val_windows=96) for e in log]
    fig = model_info.training_figure(same)
    line, result = _validation(fig)
    assert list(line.y) == [10.9, 5.6, 5.4, 4.4] and len(fig.data) == 2


def test_the_shipped_curves_join_only_comparable_validation_points():
    log = model_info.load_training_log()
    windows = {e["val_windows"] for e in log if "val_windows" in e}
    line, result = _validation(model_info.training_figure(log))
    if len(windows) > 1:
        assert len(result.y) == 1
    shown = [e for e in log if e.get("val_loss") in list(line.y)]
    assert len({e.get("val_windows") for e in shown}) == 1


def test_missing_training_log_gives_an_explaining_figure(tmp_path):
    assert model_info.load_training_log(tmp_path / "none.json") == []
    fig = model_info.training_figure([])
    assert not fig.data and "No training log" in fig.layout.annotations[0].text


@pytest.fixture(scope="module")
def onnx_files():
    from export import ensure_onnx

    return ensure_onnx()


def test_onnx_summary_lists_the_cache_interface(onnx_files):
    n_layer = load_pretrained().config.n_layer
    summary = model_info.onnx_summary(onnx_files["fp32"])
    inputs = [i["name"] for i in summary["inputs"]]
    outputs = [o["name"] for o in summary["outputs"]]
    assert inputs[:3] == ["input_ids", "attention_mask", "position_ids"] and len(inputs) == 3 + 2 * n_layer
    assert f"past_key_values.{n_layer - 1}.value" in inputs
    assert outputs[0] == "logits" and f"present.{n_layer - 1}.value" in outputs
    assert summary["op_counts"]["MatMul"] >= 4 * n_layer  # Q/K/V, W_O, two MLP matrices per block
    text = model_info.onnx_markdown(summary)
    assert "`input_ids`" in text and "more like these" in text
    fig = model_info.operators_figure(summary)
    assert "MatMul" in fig.data[0].y


def test_onnxruntime_snippet_runs_and_decodes_greedily(onnx_files, tmp_path):
    """The Model tab's first snippet, run as a user would (its own process, in a folder holding the
    unpacked download as gpt-playground/, only onnxruntime, numpy and tokenizers): its greedy text
    must match PyTorch's greedy decoding."""
    snippets = model_info.client_snippets()
    assert list(snippets) == ["onnxruntime (Python)", "Optimum", "transformers.js (Node.js or a browser)", "transformers (PyTorch)"]
    language, code = snippets["onnxruntime (Python)"]
    assert language == "python" and "model_quantized.onnx" in code
    (tmp_path / "gpt-playground").symlink_to(onnx_files["fp32"].parent.parent, target_is_directory=True)
    script = tmp_path / "snippet.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr

    enc, model = get_tokenizer(), load_pretrained()
    ids = enc.encode("Romeo.\n")  # the snippet's prompt, in the corpus's style
    with torch.no_grad():
        ref = model.generate(torch.tensor([ids]), 10, temperature=0.0)[0].tolist()
    assert out.stdout.startswith(enc.decode(ref))
