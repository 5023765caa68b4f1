"""The shared model loader: one load for many threads, clear messages for missing weights."""

from __future__ import annotations

import threading
import time

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
