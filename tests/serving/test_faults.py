"""Faults an operator may meet, each ending in a clear message or a repair, never a traceback:
missing or corrupt ONNX files, missing weights at start-up, CUDA asked for where it cannot run.
Unit level, on temporary copies: the shipped files are never touched."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import gradio as gr
import pytest

from export import artifact_paths
from playground import resources
from playground.resources import ResourceError
from playground.ui.common import user_errors

FP32, INT8 = artifact_paths()["fp32"], artifact_paths()["int8"]
# The shipped ONNX files (copied, truncated, opened by default below), built if this clone has none.
pytestmark = pytest.mark.usefixtures("shipped_onnx")


@pytest.fixture
def corrupt_onnx(tmp_path) -> Path:
    """A truncated copy of the real file, as a crash mid-download would leave it."""
    path = tmp_path / "model.onnx"
    with open(FP32, "rb") as src:
        path.write_bytes(src.read(1 << 20))
    return path


def test_missing_onnx_names_the_command_that_builds_it(tmp_path):
    with pytest.raises(ResourceError, match=r"missing.*`python -m export`"):
        resources.open_engine(tmp_path / "model.onnx")


@pytest.mark.parametrize("content", ["truncated", "garbage"])
def test_corrupt_onnx_names_the_command_that_rebuilds_it(tmp_path, corrupt_onnx, content):
    path = corrupt_onnx if content == "truncated" else tmp_path / "garbage.onnx"
    if content == "garbage":
        path.write_bytes(b"\x00not an onnx file" * 100)
    with pytest.raises(ResourceError, match=r"cannot be opened.*`python -m export`"):
        resources.open_engine(path)


def test_the_user_sees_the_fix_not_a_traceback(tmp_path):
    """What a request meets when the file vanished while the app runs: a gr.Error naming the fix."""

    def handler() -> None:
        resources.open_engine(tmp_path / "gone.onnx")

    with pytest.raises(gr.Error) as info:
        user_errors(handler)()
    assert "python -m export" in str(info.value) and "Traceback" not in str(info.value)


def test_a_corrupt_onnx_file_is_stale_so_the_next_start_rebuilds_it(tmp_path):
    """``ensure_onnx`` (run by app.py at start-up) rebuilds every stale file; a corrupt copy must
    count as stale while an intact copy of the same file stays current."""
    from export import stale_files

    out = tmp_path / "artifacts"
    out.mkdir()
    paths = artifact_paths(out)
    paths["int8"].parent.mkdir(parents=True)
    shutil.copyfile(INT8, paths["int8"])
    shutil.copyfile(artifact_paths()["quantized"], paths["quantized"])
    with open(FP32, "rb") as src:
        paths["fp32"].write_bytes(src.read(4096))
    assert stale_files(out_dir=out) == ["fp32", "hub"]  # hub: the folder's other files are missing here


def test_missing_weights_stop_the_start_with_the_command_that_fixes_it(tmp_path, monkeypatch, capsys):
    import model

    from playground.ui.startup import prepare_onnx

    monkeypatch.setattr(model, "WEIGHTS_DIR", tmp_path)  # an empty folder: no model.safetensors
    with pytest.raises(SystemExit) as info:
        prepare_onnx()
    message = str(info.value.code)
    assert "cannot start" in message and "python -m model.train" in message


@pytest.fixture
def fresh_fallback(monkeypatch):
    resources._say_cuda_unusable.cache_clear()  # said once a process: this test sees its own
    from runtime import providers

    monkeypatch.setattr(providers, "cuda_usable", lambda: False)  # as on a machine without a GPU


def test_cuda_requested_but_unusable_runs_on_the_cpu_and_says_so_once(fresh_fallback, monkeypatch, caplog):
    monkeypatch.setenv(resources.PROVIDER_ENV, "cuda")
    with caplog.at_level(logging.WARNING, logger="playground"):
        engine = resources.open_engine()
        again = resources.open_engine()
    assert engine.provider == again.provider == "CPUExecutionProvider"
    said = [r.getMessage() for r in caplog.records if "CUDA" in r.getMessage()]
    assert len(said) == 1 and "on the CPU" in said[0]


def test_an_unknown_provider_setting_falls_back_to_auto(monkeypatch, caplog):
    monkeypatch.setenv(resources.PROVIDER_ENV, "tpu")
    with caplog.at_level(logging.WARNING, logger="playground"):
        assert resources.requested_provider() == "auto"
    assert "auto, cpu, cuda" in caplog.text
