"""ONNX export round trip on a tiny randomly initialised GPT: files, names, metadata, parity."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import numpy_helper

from export import ensure_onnx, inspect_onnx
from export.build import stale_files
from export.engine import Engine
from export.metadata import sha256_file
from export.onnx_export import IR_VERSION
from export.validate import check_parity, format_table, run_checks
from model import GPT, GPTConfig, load_pretrained
from model.train import save_weights

ROOT = Path(__file__).resolve().parent.parent
TINY = GPTConfig(vocab_size=50257, block_size=32, n_layer=2, n_head=4, d_model=64)


def save_model_dir(model: GPT, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model.config.to_json(folder / "config.json")
    save_weights(model, folder / "model.safetensors")
    return folder


@lru_cache(maxsize=1)
def tiny_artifacts(base: Path) -> tuple[Path, dict[str, Path], list[tuple[float, str]]]:
    """A tiny model folder and its exported files, built once per test session by ensure_onnx."""
    torch.manual_seed(0)
    weights = save_model_dir(GPT(TINY).eval(), base / "weights")
    calls: list[tuple[float, str]] = []
    paths = ensure_onnx(progress=lambda f, text: calls.append((f, text)), weights_dir=weights, out_dir=base / "artifacts")
    return weights, paths, calls


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> tuple[Path, dict[str, Path], list[tuple[float, str]]]:
    return tiny_artifacts(tmp_path_factory.getbasetemp() / "tiny_export")


def test_ensure_onnx_builds_both_files_with_progress(tiny):
    _, paths, calls = tiny
    assert set(paths) == {"fp32", "int8"} and all(p.is_file() for p in paths.values())
    assert not list(paths["fp32"].parent.glob("*.data")), "the fp32 file must be self-contained"
    fractions = [f for f, _ in calls]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert all(isinstance(text, str) and text for _, text in calls)


def test_plain_onnxruntime_runs_the_graph_with_optimum_names(tiny):
    _, paths, _ = tiny
    session = ort.InferenceSession(str(paths["fp32"]), providers=["CPUExecutionProvider"])
    n = TINY.n_layer
    past = [f"past_key_values.{i}.{k}" for i in range(n) for k in ("key", "value")]
    present = [f"present.{i}.{k}" for i in range(n) for k in ("key", "value")]
    assert [i.name for i in session.get_inputs()] == ["input_ids", *past]
    assert [o.name for o in session.get_outputs()] == ["logits", *present]
    assert session.get_inputs()[0].type == "tensor(int64)"
    assert all(i.type == "tensor(float)" for i in session.get_inputs()[1:])

    # First step with an empty cache (batch 2, 5 tokens), then one token through the cache.
    ids = np.array([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]], dtype=np.int64)
    empty = np.zeros((2, TINY.n_head, 0, TINY.head_dim), dtype=np.float32)
    out = session.run(None, {"input_ids": ids, **{name: empty for name in past}})
    assert out[0].shape == (2, 5, TINY.vocab_size)
    assert out[1].shape == (2, TINY.n_head, 5, TINY.head_dim)
    nxt = np.array([[11], [12]], dtype=np.int64)
    step = session.run(None, {"input_ids": nxt, **dict(zip(past, out[1:]))})
    full = session.run(None, {"input_ids": np.concatenate([ids, nxt], 1), **{name: empty for name in past}})
    assert step[1].shape == (2, TINY.n_head, 6, TINY.head_dim)
    np.testing.assert_allclose(step[0][:, -1], full[0][:, -1], atol=1e-4)


def test_metadata_describes_the_source(tiny):
    weights, paths, _ = tiny
    for key, path in paths.items():
        meta = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
        assert json.loads(meta["gpt_config"])["n_layer"] == TINY.n_layer
        assert meta["tokenizer"] == "gpt2"
        assert meta["source_weights_sha256"] == sha256_file(weights / "model.safetensors")
        assert {"training_step", "val_loss"} <= meta.keys()
        assert ("int8" in meta["quantization"]) == (key == "int8")


def test_ir_version_is_readable_by_the_pinned_onnxruntime(tiny):
    _, paths, _ = tiny
    for path in paths.values():
        assert onnx.load(str(path)).ir_version <= IR_VERSION


def test_all_checks_pass_including_greedy_past_the_context(tiny):
    weights, paths, _ = tiny
    # 40 greedy tokens on a 32-token context: the sliding window must match PyTorch too.
    results = run_checks(paths, load_pretrained(weights), quick=True, greedy_tokens=40)
    assert all(c.ok for c in results), format_table(results)
    assert "greedy text" in format_table(results)


def test_parity_check_catches_a_wrong_graph(tiny, tmp_path):
    weights, paths, _ = tiny
    proto = onnx.load(str(paths["fp32"]))
    # The first block's query/key/value weights, scaled by 1 %.
    qkv = next(t for t in proto.graph.initializer if list(t.dims) == [TINY.d_model, 3 * TINY.d_model])
    qkv.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(qkv) * 1.01, qkv.name))
    broken = tmp_path / "broken.onnx"
    onnx.save_model(proto, str(broken))
    check = check_parity(load_pretrained(weights), Engine.load(broken, provider="cpu"), [(1, 8)], 1e-4)
    assert not check.ok


def test_int8_quantizes_every_linear_and_the_tied_head(tiny):
    weights, paths, _ = tiny
    info = inspect_onnx(paths["int8"])
    # 4 linears per block (qkv, attention out, two feed-forward) plus the output head, as 8-bit
    # MatMulNBits (weights packed in uint8 [N, blocks, block bytes]).
    assert info["op_counts"].get("MatMulNBits") == 4 * TINY.n_layer + 1
    proto = onnx.load(str(paths["int8"]))
    nbits = [n for n in proto.graph.node if n.op_type == "MatMulNBits"]
    assert all(next(a.i for a in n.attribute if a.name == "bits") == 8 for n in nbits)
    big = [t for t in proto.graph.initializer if t.data_type == onnx.TensorProto.UINT8]
    assert any(TINY.vocab_size in t.dims for t in big), "the output head must be stored in 8 bits"


def test_inspect_reports_inputs_outputs_and_ops(tiny):
    _, paths, _ = tiny
    info = inspect_onnx(paths["fp32"])
    assert info["inputs"][0] == {"name": "input_ids", "dtype": "int64", "shape": ["batch", "seq"]}
    assert info["inputs"][1]["shape"] == ["batch", TINY.n_head, "past_seq", TINY.head_dim]
    assert info["outputs"][0]["name"] == "logits" and info["outputs"][0]["shape"][-1] == TINY.vocab_size
    assert info["op_counts"]["MatMul"] >= 4 * TINY.n_layer + 1
    assert info["n_nodes"] == sum(info["op_counts"].values())


def test_up_to_date_files_are_kept_and_new_weights_make_them_stale(tiny, tmp_path):
    weights, paths, _ = tiny
    out = paths["fp32"].parent
    mtimes = {k: p.stat().st_mtime_ns for k, p in paths.items()}
    calls = []
    ensure_onnx(progress=lambda f, t: calls.append(f), weights_dir=weights, out_dir=out)
    assert {k: p.stat().st_mtime_ns for k, p in paths.items()} == mtimes and calls == [1.0]

    torch.manual_seed(1)
    other = save_model_dir(GPT(TINY), tmp_path / "other")
    assert stale_files(other, out) == ["fp32", "int8"]
    paths["int8"].rename(tmp_path / "moved.onnx")  # a missing file is stale too
    try:
        assert stale_files(weights, out) == ["int8"]
    finally:
        (tmp_path / "moved.onnx").rename(paths["int8"])


def test_cli_reports_missing_weights_without_a_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "export", "--weights", str(tmp_path / "nowhere"), "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert "error:" in proc.stderr and "model.safetensors" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_shipped_weights_pass_every_export_check():
    """`python -m export`'s checks on the real model: parity, cache, 200 greedy tokens, int8 loss.

    Uses artifacts/ as the app does: rebuilt only when missing or stale."""
    from model import WEIGHTS_DIR

    paths = ensure_onnx()
    val_path = ROOT / "data" / "shakespeare" / "val.bin"
    val = np.fromfile(val_path, dtype=np.uint16) if val_path.is_file() else None
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # batch-1 PyTorch decoding is several times faster on 1 of 2 busy cores
    try:
        results = run_checks(paths, load_pretrained(WEIGHTS_DIR), greedy_tokens=200, val_tokens=val, loss_windows=16)
    finally:
        torch.set_num_threads(threads)
    assert all(c.ok for c in results), format_table(results)
