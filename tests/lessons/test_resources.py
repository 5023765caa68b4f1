"""What the tabs share (playground/resources.py): one model load for many threads, clear messages
for missing weights, one onnxruntime engine, the provider setting."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from playground import resources
from conftest import shipped_resources

RES = shipped_resources()  # the shipped model and engines, shared with the in-process app


def test_concurrent_first_use_loads_once(monkeypatch, small_model, tmp_path):
    calls = []

    def slow_load(path=None):
        calls.append(path)
        time.sleep(0.2)  # long enough for every thread to arrive while loading
        return small_model

    monkeypatch.setattr(resources, "load_pretrained", slow_load)
    res = resources.Resources(tmp_path)
    got, barrier = [], threading.Barrier(8)

    def worker():
        barrier.wait()
        got.append(res.model())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert calls == [tmp_path] and len(got) == 8 and all(m is small_model for m in got)


def test_two_apps_resources_show_their_own_models_and_the_shipped_one_is_loaded_once(small_model):
    """What one app's tabs share is its own: another Resources (another --model) changes nothing
    of it, and every Resources of the shipped model shares its one load."""
    shipped, other = resources.Resources(), resources.Resources(model=small_model)
    assert other.model() is small_model and shipped.model() is resources.shipped_model() is resources.Resources().model()
    assert resources.is_shipped(shipped.model()) and not resources.is_shipped(small_model)


def test_missing_weights_name_the_fix(tmp_path):
    with pytest.raises(resources.ResourceError, match="python -m model.train|git checkout model/weights"):
        resources.Resources(tmp_path).model()


def test_a_failed_load_is_not_kept(tmp_path, small_model):
    """Weights put back where they were missing: the next request loads them (no restart)."""
    from model import save_pretrained

    res = resources.Resources(tmp_path)
    with pytest.raises(resources.ResourceError, match="missing"):
        res.model()
    save_pretrained(small_model, tmp_path)
    assert res.model().config == small_model.config


def test_corrupt_weights_name_the_fix(tmp_path):
    from model import GPTConfig

    GPTConfig(n_layer=1, n_head=2, d_model=8, block_size=8).to_json(tmp_path / "config.json")
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(resources.ResourceError, match="could not be loaded"):
        resources.load_model(tmp_path)


def test_shared_model_is_in_eval_mode():
    assert not resources.shipped_model().training
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

    monkeypatch.setattr(resources, "open_engine", flaky_open)
    res = resources.Resources()
    with pytest.raises(resources.ResourceError, match="missing"):
        res.engine()
    assert res.engine() is engine and res.engine() is engine
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


# --- the app's resources reach every tab ----------------------------------------------------------


def test_every_tab_of_an_app_computes_with_the_model_its_resources_hold(shipped_onnx):
    """An app built on another model's resources (as ``python app.py --model DIR`` builds one):
    each tab's answers are that model's, never the shipped one's, and its controls span its size."""
    import gradio as gr
    import numpy as np
    import torch

    import app
    from model import GPT, GPTConfig
    from playground import attention, embeddings, inside
    from playground.compare import next_token

    torch.manual_seed(3)
    tiny = GPT(GPTConfig(block_size=64, n_layer=1, n_head=2, d_model=16)).eval()
    demo = app.build_app(shipped_onnx, res=resources.Resources(model=tiny))
    api = {fn.api_name: fn.fn for fn in demo.fns.values() if fn.api_name}

    got = api["embedding_arithmetic"]("king - man + woman", 5)
    assert got == embeddings.embedding_arithmetic("king - man + woman", 5, model=tiny).to_dict()
    assert got != embeddings.embedding_arithmetic("king - man + woman", 5).to_dict()
    weights = np.asarray(api["attention"]("hello everyone", 0, 1)["weights"])
    np.testing.assert_allclose(weights, attention.attention("hello everyone", 0, 1, model=tiny).weights[0, 1], atol=1e-4)
    assert api["inside"]("hello everyone", 0, 0)["loss"] == pytest.approx(inside.inside("hello everyone", model=tiny).to_dict()["loss"])
    shown, _ = api["compare"]("hello everyone", "king", "hello everyone")["models"]
    assert shown["prompt_loss"] == pytest.approx(next_token("hello everyone", tiny, "tiny").loss, abs=1e-4)
    sliders = {b.elem_id: b for b in demo.blocks.values() if isinstance(b, gr.Slider) and b.elem_id in ("att-layer", "ins-head")}
    assert sliders["att-layer"].interactive is False and "Layer 0" in sliders["att-layer"].label  # its only layer
    assert sliders["ins-head"].maximum == 1 and sliders["ins-head"].interactive is not False  # two heads
