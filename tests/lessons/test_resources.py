"""What the tabs share (playground/resources.py): one model load for many threads, clear messages
for missing weights, one onnxruntime engine, the provider setting."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from playground import resources


@pytest.fixture
def restore_model():
    saved = resources.get_model()
    yield
    resources.set_model(saved)


def test_concurrent_first_use_loads_once(monkeypatch, restore_model, small_model):
    calls = []

    def slow_load(path=None):
        calls.append(path)
        time.sleep(0.2)  # long enough for every thread to arrive while loading
        return small_model

    monkeypatch.setattr(resources, "load_pretrained", slow_load)
    resources.set_model(None)
    got, barrier = [], threading.Barrier(8)

    def worker():
        barrier.wait()
        got.append(resources.get_model())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(calls) == 1 and len(got) == 8 and all(m is small_model for m in got)


def test_missing_weights_name_the_fix(tmp_path, restore_model):
    resources.set_model(None)
    with pytest.raises(resources.ResourceError, match="python -m model.train|git checkout model/weights"):
        resources.get_model(tmp_path)


def test_corrupt_weights_name_the_fix(tmp_path, restore_model):
    from model import GPTConfig

    GPTConfig(n_layer=1, n_head=2, d_model=8, block_size=8).to_json(tmp_path / "config.json")
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    resources.set_model(None)
    with pytest.raises(resources.ResourceError, match="could not be loaded"):
        resources.get_model(tmp_path)


def test_shared_model_is_in_eval_mode():
    assert not resources.get_model().training
    assert resources.get_encoding().n_vocab == 50257


# --- the onnxruntime engine ---------------------------------------------------------------------


def test_engine_is_shared_and_a_failure_is_not_kept(monkeypatch):
    """Every request gets the same engine; a failed open is retried on the next request, so
    rebuilding the ONNX file mends a running app."""
    engine, calls = object(), []

    def flaky_open(path=None, provider=None):
        calls.append(provider)
        if len(calls) == 1:
            raise resources.ResourceError("the ONNX model file is missing")
        return engine

    monkeypatch.setattr(resources, "_engine", None)
    monkeypatch.setattr(resources, "open_engine", flaky_open)
    with pytest.raises(resources.ResourceError, match="missing"):
        resources.get_engine()
    assert resources.get_engine() is engine and resources.get_engine() is engine
    assert len(calls) == 2


@pytest.mark.parametrize("value, provider", [(None, "auto"), ("", "auto"), (" CPU ", "cpu"), ("cuda", "cuda"), ("Auto", "auto")])
def test_requested_provider(monkeypatch, value, provider):
    if value is None:
        monkeypatch.delenv(resources.PROVIDER_ENV, raising=False)
    else:
        monkeypatch.setenv(resources.PROVIDER_ENV, value)
    assert resources.requested_provider() == provider


FILES = {"fp32": Path("model.onnx"), "quantized": Path("model_quantized.onnx"), "int8": Path("model_int8.onnx")}


@pytest.mark.parametrize(
    "requested, on_gpu, expected",
    [
        ("auto", False, "int8"),  # a CPU: the integer file, 2.4x fp32's speed there
        ("auto", True, "fp32"),  # a GPU: float kernels
        ("quantized", False, "quantized"),
        ("fp32", False, "fp32"),
        ("int8", True, "int8"),  # asked for: given, even on a GPU
    ],
)
def test_the_engine_file_follows_the_device_unless_asked(requested, on_gpu, expected):
    assert resources.choose_file(FILES, on_gpu, requested) == FILES[expected]


def test_a_model_without_the_asked_file_generates_with_fp32():
    assert resources.choose_file({"fp32": FILES["fp32"]}, on_gpu=False, requested="auto") == FILES["fp32"]
    assert resources.choose_file({"fp32": FILES["fp32"]}, on_gpu=False, requested="int8") == FILES["fp32"]


def test_an_unknown_file_request_is_auto(monkeypatch):
    monkeypatch.setenv(resources.ONNX_FILE_ENV, "fp64")
    assert resources.requested_file() == "auto"
    monkeypatch.setenv(resources.ONNX_FILE_ENV, " INT8 ")
    assert resources.requested_file() == "int8"


def test_pytorch_leaves_a_core_to_the_decoding_loop():
    import os

    import torch

    before = torch.get_num_threads()
    try:
        threads = resources.budget_cpu()
        assert threads == torch.get_num_threads() == max(1, (os.cpu_count() or 2) - 1)
    finally:
        torch.set_num_threads(before)
