"""Where the exported files go (the graph's interface, input and output names, is runtime/interface.py).

``artifacts/hub/`` is one folder laid out as a Hugging Face Hub model repository; the app and the
engine run its ONNX files in place: ``onnx/model.onnx`` (fp32), ``onnx/model_quantized.onnx``
(8-bit weights, float compute: the same behaviour natively and in the browser) and
``onnx/model_int8.onnx`` (8-bit weights and activations: the fastest natively on a CPU).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HUB_DIRNAME = "hub"
# The file names transformers.js looks for: dtype "fp32", "q8" (the Hub's usual 8-bit file) and
# "int8"; Optimum takes them by name (file_name=...).
FP32_NAME = "onnx/model.onnx"
QUANTIZED_NAME = "onnx/model_quantized.onnx"
INT8_NAME = "onnx/model_int8.onnx"

# Where the built files live. A Space's disk is wiped at every restart, its persistent storage
# (/data, when the Space has some) is not: built there once, they are reused by every later start.
ARTIFACTS_ENV = "PLAYGROUND_ARTIFACTS"
SPACE_STORAGE = Path("/data")


def artifacts_dir(environ: Mapping[str, str] = os.environ, root: Path = ROOT, storage: Path = SPACE_STORAGE) -> Path:
    """``$PLAYGROUND_ARTIFACTS`` if set; else ``root``/artifacts when its ONNX files are there (built
    here, or shipped with a Space's upload); else, on a Space (``SPACE_ID`` set) whose persistent
    storage is writable, ``/data/gpt-playground/artifacts``; else ``root``/artifacts."""
    if environ.get(ARTIFACTS_ENV):
        return Path(environ[ARTIFACTS_ENV]).expanduser().resolve()
    local = root / "artifacts"
    if (local / HUB_DIRNAME / FP32_NAME).is_file():
        return local
    if environ.get("SPACE_ID") and storage.is_dir() and os.access(storage, os.W_OK):
        return storage / "gpt-playground" / "artifacts"
    return local


ARTIFACTS_DIR = artifacts_dir()
HUB_ZIP_NAME = "gpt-playground-hub.zip"  # the whole folder as one download (the app's Model tab)


def hub_dir(out_dir: Path | None = None) -> Path:
    """The Hub folder inside ``out_dir`` (default artifacts/)."""
    return (Path(out_dir) if out_dir is not None else ARTIFACTS_DIR) / HUB_DIRNAME

