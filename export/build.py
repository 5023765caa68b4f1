"""Build artifacts/gpt.onnx and gpt.int8.onnx from the weights when missing or stale."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from .metadata import build_metadata, is_current, sha256_file
from .naming import ARTIFACTS_DIR, FP32_NAME, INT8_NAME

Progress = Callable[[float, str], None]  # (fraction done 0..1, what is happening)


def artifact_paths(out_dir: Path | None = None) -> dict[str, Path]:
    out_dir = Path(out_dir) if out_dir is not None else ARTIFACTS_DIR
    return {"fp32": out_dir / FP32_NAME, "int8": out_dir / INT8_NAME}


def stale_files(weights_dir: Path | None = None, out_dir: Path | None = None) -> list[str]:
    """Keys of :func:`artifact_paths` whose file is missing or was built from other weights."""
    from model import WEIGHTS_DIR

    weights = (Path(weights_dir) if weights_dir is not None else WEIGHTS_DIR) / "model.safetensors"
    if not weights.is_file():
        raise FileNotFoundError(f"{weights} not found: train a model with `python -m model.train` first")
    digest = sha256_file(weights)
    return [key for key, path in artifact_paths(out_dir).items() if not is_current(path, digest)]


def build(
    weights_dir: Path | None = None,
    out_dir: Path | None = None,
    progress: Progress | None = None,
    only: list[str] | None = None,
) -> dict[str, Path]:
    """Export (and quantize) the weights in ``weights_dir``; ``only`` limits which files are written.

    Files are written under a temporary name and renamed, so a crash never leaves a file that
    looks current.
    """
    from model import load_pretrained

    from .onnx_export import export_fp32
    from .quantize import QUANTIZATION, quantize_int8

    report = progress or (lambda fraction, text: None)
    paths = artifact_paths(out_dir)
    only = list(paths) if only is None else only
    report(0.0, "loading the PyTorch weights")
    model = load_pretrained(weights_dir)
    from model import WEIGHTS_DIR

    weights = (Path(weights_dir) if weights_dir is not None else WEIGHTS_DIR) / "model.safetensors"
    meta = build_metadata(model.config, weights, quantization="none")
    paths["fp32"].parent.mkdir(parents=True, exist_ok=True)
    fp32 = paths["fp32"]
    if "fp32" in only or not is_current(fp32, meta["source_weights_sha256"]):
        report(0.1, "exporting to ONNX (fp32, key/value cache)")
        tmp = fp32.with_suffix(".tmp.onnx")
        with _quiet_logs():
            export_fp32(model, tmp, meta)
        os.replace(tmp, fp32)
    if "int8" in only:
        report(0.6, "quantizing MatMul weights to 8 bits")
        tmp = paths["int8"].with_suffix(".tmp.onnx")
        with _quiet_logs():
            quantize_int8(fp32, tmp, {**meta, "quantization": QUANTIZATION})
        os.replace(tmp, paths["int8"])
    report(1.0, "done")
    return paths


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
    """Silence the exporter's and quantizer's log chatter for the duration of a build.

    torch.onnx logs one line per optional torchvision op it cannot register, and the ORT
    quantizer (on the root logger) suggests a pre-processing step we do not need.
    """
    loggers = [logging.getLogger(), logging.getLogger("torch.onnx"), logging.getLogger("torch.onnx._internal.exporter._registration")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
