"""The app's first-start build runs in a child process (export.apart), whose memory goes when it exits:
the files it writes are current, none of the build runs in the app's process, a failure is said
as the child's own error without a traceback, and up-to-date files start no process."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from plain_onnx import read, session

import export
from export import stale_files
from export.apart import BuildFailed, ensure_onnx_apart


def _here(*args, **kwargs):
    raise AssertionError("the build ran in the calling process")


def _logits(path, ids=(464, 2068, 11, 318)) -> np.ndarray:
    return read(session(path), list(ids))


@pytest.mark.slow  # 31 s: a whole build in a child process
def test_a_build_apart_writes_current_files_and_runs_none_of_the_build_here(tiny_export, tmp_path, monkeypatch, capfd):
    monkeypatch.setattr(export, "build", _here)  # what ensure_onnx calls
    monkeypatch.setattr(export, "ensure_onnx", _here)
    out = tmp_path / "out"
    announced: list[list[str]] = []
    paths = ensure_onnx_apart(tiny_export.weights, out, on_build=announced.append)
    assert announced == [["fp32", "quantized", "int8", "hub"]]
    assert stale_files(tiny_export.weights, out) == []
    assert set(paths) == {"fp32", "quantized", "int8"} and all(p.is_relative_to(out) for p in paths.values())
    for key in paths:  # the tiny model's files, as the in-process build writes them
        np.testing.assert_allclose(_logits(paths[key]), _logits(tiny_export.paths[key]), atol=1e-5)
    progress = capfd.readouterr().err
    assert "100%" in progress and "quantizing" in progress  # the child's progress reaches the console
    assert "RuntimeWarning" not in progress

    monkeypatch.setattr(subprocess, "run", _here)  # up to date: no child
    assert ensure_onnx_apart(tiny_export.weights, out, on_build=announced.append) == paths
    assert len(announced) == 1


def test_a_failed_build_apart_is_the_childs_error_in_one_line(tiny_export, tmp_path, capfd):
    weights = tmp_path / "weights"
    shutil.copytree(tiny_export.weights, weights)
    (weights / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(BuildFailed) as info:
        ensure_onnx_apart(weights, tmp_path / "out")
    kind, _, message = str(info.value).partition(": ")
    assert kind.isidentifier() and kind not in {"BuildFailed", "RuntimeError"} and message
    assert "Traceback" not in capfd.readouterr().err


def test_the_apps_start_says_why_its_build_failed_and_what_fixes_it(tiny_export, tmp_path, monkeypatch):
    import model
    from export import naming

    from playground.ui.startup import prepare_onnx

    weights = tmp_path / "weights"
    shutil.copytree(tiny_export.weights, weights)
    (weights / "model.safetensors").write_bytes(b"\x08" + b"\x00" * 7 + b"{}")  # a header that says nothing
    monkeypatch.setattr(model, "WEIGHTS_DIR", weights)
    monkeypatch.setattr(naming, "ARTIFACTS_DIR", tmp_path / "artifacts")
    with pytest.raises(SystemExit) as info:
        prepare_onnx()
    message = str(info.value.code)
    assert message.startswith("GPT Playground cannot start: building the ONNX files failed (")
    assert "BuildFailed" not in message and "python -m export" in message
    assert not (tmp_path / "artifacts" / "hub" / "onnx" / "model.onnx").exists()
