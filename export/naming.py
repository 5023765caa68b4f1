"""The ONNX graph's interface: Hugging Face Optimum's input/output names, and where files go."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS_DIR = ROOT / "artifacts"
FP32_NAME = "gpt.onnx"
INT8_NAME = "gpt.int8.onnx"

INPUT_IDS = "input_ids"
LOGITS = "logits"


def past_names(n_layer: int) -> list[str]:
    """``past_key_values.{i}.key`` / ``.value`` for each layer, in graph input order."""
    return [f"past_key_values.{i}.{kind}" for i in range(n_layer) for kind in ("key", "value")]


def present_names(n_layer: int) -> list[str]:
    """``present.{i}.key`` / ``.value`` for each layer, in graph output order."""
    return [f"present.{i}.{kind}" for i in range(n_layer) for kind in ("key", "value")]
