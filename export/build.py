"""Build ``artifacts/hub/`` (the three ONNX files and the Hub files beside them) from the weights,
when missing or stale."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from .metadata import build_metadata, is_current, sha256_file
from .naming import FP32_NAME, INT8_NAME, QUANTIZED_NAME, hub_dir

Progress = Callable[[float, str], None]  # (fraction done 0..1, what is happening)


def console_progress(fraction: float, text: str) -> None:
    """A progress line on the console (stderr): a bar, the share done and what is being done."""
    width = 30
    done = int(round(width * max(0.0, min(1.0, fraction))))
    print(f"[{'#' * done}{'.' * (width - done)}] {fraction:4.0%}  {text}", file=sys.stderr, flush=True)


def artifact_paths(out_dir: Path | None = None) -> dict[str, Path]:
    """The ONNX files under ``out_dir``/hub/: "fp32" (onnx/model.onnx), "quantized"
    (onnx/model_quantized.onnx: 8-bit weights, float compute; the download for browsers and the
    default 8-bit file of Hub clients) and "int8" (onnx/model_int8.onnx: 8-bit integer products,
    the fastest on a CPU natively)."""
    folder = hub_dir(out_dir)
    return {"fp32": folder / FP32_NAME, "quantized": folder / QUANTIZED_NAME, "int8": folder / INT8_NAME}


def weights_file(weights_dir: Path | None) -> Path:
    from model import WEIGHTS_DIR

    return (Path(weights_dir) if weights_dir is not None else WEIGHTS_DIR) / "model.safetensors"


def stale_files(weights_dir: Path | None = None, out_dir: Path | None = None) -> list[str]:
    """Keys of :func:`artifact_paths` whose file is missing or was built from other weights, and
    "hub" when a file of the Hub folder besides them is missing."""
    from .hub import missing_hub_files

    weights = weights_file(weights_dir)
    if not weights.is_file():
        raise FileNotFoundError(f"{weights} not found: train a model with `python -m model.train` first")
    digest = sha256_file(weights)
    stale = [key for key, path in artifact_paths(out_dir).items() if not is_current(path, digest)]
    if stale or missing_hub_files(hub_dir(out_dir)):
        stale.append("hub")
    return stale


def build(
    weights_dir: Path | None = None,
    out_dir: Path | None = None,
    progress: Progress | None = None,
    only: list[str] | None = None,
) -> dict[str, Path]:
    """Export (and quantize) the weights in ``weights_dir``; ``only`` limits which files are written
    ("fp32", "quantized", "int8", "hub"; default all). The Hub files are written first and the ONNX files last,
    each under a temporary name and renamed: a crash never leaves a file that looks current.
    """
    from model import load_pretrained

    from .hub import write_hub_files, write_model_card
    from .onnx_export import export_fp32
    from .quantize import FORMATS, quantize_files

    report = progress or (lambda fraction, text: None)
    paths = artifact_paths(out_dir)
    only = [*paths, "hub"] if only is None else only
    report(0.0, "loading the PyTorch weights")
    model = load_pretrained(weights_dir)
    weights = weights_file(weights_dir)
    meta = build_metadata(model.config, weights, quantization="none")
    if "hub" in only:
        report(0.05, "writing config, tokenizer, safetensors and model card")
        write_hub_files(weights.parent, hub_dir(out_dir), model.config)
    paths["fp32"].parent.mkdir(parents=True, exist_ok=True)
    fp32 = paths["fp32"]
    if "fp32" in only or not is_current(fp32, meta["source_weights_sha256"]):
        report(0.15, "exporting to ONNX (fp32, key/value cache)")
        tmp = fp32.with_suffix(".tmp.onnx")
        with _quiet_logs():
            export_fp32(model, tmp, meta)
        os.replace(tmp, fp32)
    eight_bit = [key for key in FORMATS if key in only]
    if eight_bit:  # both 8-bit files from one reading of the fp32 file, with the same int8 weights
        report(0.7, "quantizing the weights and the embedding to 8 bits")
        tmp = {key: paths[key].with_suffix(".tmp.onnx") for key in eight_bit}
        quantize_files(fp32, {tmp[key]: (FORMATS[key].matmul, {**meta, "quantization": FORMATS[key].quantization})
                              for key in eight_bit})
        for key in eight_bit:
            os.replace(tmp[key], paths[key])
    # Last: the card gives the files' sizes. Losses are left to `python -m export`, which measures them.
    write_model_card(hub_dir(out_dir), model.config, model.num_parameters(), weights.parent)
    report(1.0, "done")
    return paths


@contextlib.contextmanager
def _quiet_logs() -> Iterator[None]:
    """Silence the exporter's log chatter for the duration of a build: torch.onnx logs one line
    per optional torchvision op it cannot register."""
    loggers = [logging.getLogger(), logging.getLogger("torch.onnx"), logging.getLogger("torch.onnx._internal.exporter._registration")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
